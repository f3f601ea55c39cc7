package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
)

// TestShortRun runs the harness end to end on the servers it starts: both
// deployments decide without errors, and the cluster's script calls and keys
// spread over all three masters.
func TestShortRun(t *testing.T) {
	redistest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	args := []string{"-masters", "3", "-conc", "8", "-keys", "3000", "-duration", "400ms", "-warmup", "100ms", "-repeat", "1"}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("run = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	report := stdout.String()
	summary := regexp.MustCompile(`(?m)^\| (standalone|cluster-3) \| 8 \| (\d+) .*\| 0 \|$`)
	if got := len(summary.FindAllString(report, -1)); got != 2 {
		t.Fatalf("report has %d summary rows without errors, want 2:\n%s", got, report)
	}
	spread := regexp.MustCompile(`(?m)^\| cluster-3 \| 8 \| (\d) \| (\d+) \| ([\d.]+)% \| (\d+) \| ([\d.]+)% \|`)
	rows := spread.FindAllStringSubmatch(report, -1)
	if len(rows) != 3 {
		t.Fatalf("report has %d spread rows, want 3:\n%s", len(rows), report)
	}
	for _, r := range rows {
		for _, share := range []string{r[3], r[5]} {
			// 3000 keys over 3 masters: each holds about a third.
			if f, _ := strconv.ParseFloat(share, 64); f < 25 || f > 42 {
				t.Errorf("master %s: share %s%%, want 25–42%%:\n%s", r[1], share, report)
			}
		}
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{{"-masters", "1"}, {"-conc", "0"}, {"-keys", "0"}, {"-repeat", "0"}, {"extra"}} {
		var stderr strings.Builder
		if code := run(context.Background(), args, &stderr, &stderr); code != 2 {
			t.Errorf("run(%q) = %d, want 2", args, code)
		}
	}
}
