package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/bench/internal/benchproc"
	"github.com/sluice-gw/sluice/gateway/command"
)

// TestMain lets the test binary serve as the gateway child that run starts.
func TestMain(m *testing.M) {
	if cfg := os.Getenv(childConfigEnv); cfg != "" {
		os.Exit(runGatewayChild(cfg, os.Getenv(childProfileEnv)))
	}
	os.Exit(m.Run())
}

// TestQuickRun runs -quick end to end so the tool cannot rot: every cell
// must serve requests without errors or store fallbacks, the admitting cells
// must deny nothing, and memory-deny50 must deny about half. The redis cell
// is skipped when redis-server is missing, unless CI=true.
func TestQuickRun(t *testing.T) {
	names := allCellNames()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not found under CI=true: %v", err)
		}
		t.Logf("redis-server not found, skipping the redis cell: %v", err)
		names = strings.ReplaceAll(names, ",redis", "")
	}
	out := filepath.Join(t.TempDir(), "report.md")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	if code := run(ctx, []string{"-quick", "-cells", names, "-out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("run(-quick) = %d, want 0; stderr:\n%s\nstdout:\n%s", code, stderr.String(), stdout.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	if report != stdout.String() {
		t.Errorf("-out file differs from stdout")
	}
	rows := benchproc.TableRows(report)
	for name := range strings.SplitSeq(names, ",") {
		row, ok := rows[name]
		if !ok {
			t.Errorf("report has no row for cell %s", name)
			continue
		}
		if n, err := strconv.ParseFloat(row["max req/s"], 64); err != nil || n <= 0 {
			t.Errorf("%s: max req/s = %q, want a positive number", name, row["max req/s"])
		}
		if row["errors"] != "0" || row["store fallbacks"] != "0" {
			t.Errorf("%s: errors = %s, store fallbacks = %s, want 0 and 0", name, row["errors"], row["store fallbacks"])
		}
		share, err := strconv.ParseFloat(strings.TrimSuffix(row["429 share"], "%"), 64)
		if err != nil {
			t.Errorf("%s: 429 share = %q, want a percentage", name, row["429 share"])
			continue
		}
		// deny50: the ten free users' first requests are admitted, the rest of
		// the free half is denied. With an odd request count the free half is
		// one request more than half, so the share can pass 50% by a hair.
		lo, hi := 0.0, 0.0
		if name == "memory-deny50" {
			lo, hi = 40, 51
		}
		if share < lo || share > hi {
			t.Errorf("%s: 429 share = %v%%, want between %v%% and %v%%", name, share, lo, hi)
		}
	}
	if !strings.Contains(report, "memory ÷ nolimits, max req/s: ") {
		t.Errorf("report has no memory ÷ nolimits ratio:\n%s", report)
	}
	if t.Failed() {
		t.Logf("report:\n%s", report)
	}
}

// TestGatewayConfigValid checks every generated config with the same loader
// `sluice check` uses, through the child's code path.
func TestGatewayConfigValid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kind  limitsKind
		redis string
	}{
		{"nolimits", limitsNone, ""},
		{"memory", limitsAdmit, ""},
		{"memory-deny50", limitsDeny50, ""},
		{"redis", limitsAdmit, "127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sluice.yaml")
			yaml := gatewayConfig("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", tc.kind, tc.redis)
			if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := checkConfig(path); err != nil {
				t.Errorf("config does not validate: %v\n%s", err, yaml)
			}
		})
	}
}

// checkConfig runs `sluice check --config path` in process.
func checkConfig(path string) error {
	var stdout, stderr strings.Builder
	if code := command.Run(context.Background(), []string{"check", "--config", path}, &stdout, &stderr); code != 0 {
		return fmt.Errorf("sluice check exited %d: %s", code, stderr.String())
	}
	return nil
}
