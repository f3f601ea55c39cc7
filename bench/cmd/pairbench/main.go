// Pairbench compares Go benchmarks as ratios measured in pairs: it builds a
// package's test binary once, then runs each benchmark and its baseline one
// after the other, round after round, alternating which goes first, and
// reports the median of the per-round ratios. On a shared VM whose caches
// and clock speed drift from minute to minute, benchmarks run in blocks
// (`go test -count N` runs every repeat of one benchmark before the next
// benchmark starts) compare one period of the machine against another;
// pairs taken seconds apart do not.
//
// Usage:
//
//	cd bench && go run ./cmd/pairbench [-pkg PACKAGE] [-pair A=B ...] [-cpu 1,2]
//	    [-rounds 10] [-benchtime 1s] [-out FILE]
//
// Without -pair it compares the memory store against the x/time/rate
// baselines: one key, and 100k keys in random and allocation
// order.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-gw/sluice/bench/internal/benchproc"
)

// defaultPairs are the targets of BENCHMARKS.md: sluice's memory store against
// x/time/rate, with the ratio each must stay at or under.
var defaultPairs = []string{
	"Store/token_bucket/1key=XTimeRate/1key@1.0",
	"Store/token_bucket/100k_keys/random=XTimeRateMutexMap/100k_keys/random@0.5",
	"Store/token_bucket/100k_keys/seq=XTimeRateMutexMap/100k_keys/seq@0.5",
}

type pair struct {
	a, b   string  // benchmark names without the Benchmark prefix
	target float64 // the ratio a/b must stay at or under; 0: none
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pairbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("pairbench", flag.ContinueOnError)
	pkg := fs.String("pkg", "github.com/sluice-gw/sluice/bench/baseline", "package whose benchmarks to run")
	var pairFlags multiFlag
	fs.Var(&pairFlags, "pair", "BenchA=BenchB[@target]: compare A against baseline B (repeatable)")
	cpus := fs.String("cpu", "1,2", "GOMAXPROCS values, comma-separated")
	rounds := fs.Int("rounds", 10, "pairs measured per benchmark and cpu count")
	benchtime := fs.String("benchtime", "1s", "-test.benchtime of each run")
	out := fs.String("out", "", "also write the report to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(pairFlags) == 0 {
		pairFlags = defaultPairs
	}
	pairs, err := parsePairs(pairFlags)
	if err != nil {
		return err
	}
	cpuList, err := benchproc.ParseInts("-cpu", *cpus)
	if err != nil {
		return err
	}
	if *rounds < 1 {
		return errors.New("-rounds must be at least 1")
	}

	dir, err := os.MkdirTemp("", "pairbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "bench.test")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, *pkg)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building %s: %w", *pkg, err)
	}

	started := time.Now()
	results := make(map[cell][]sample)
	for r := range *rounds {
		for _, p := range pairs {
			for _, c := range cpuList {
				first, second := p.a, p.b
				if r%2 == 1 {
					first, second = second, first
				}
				got := make(map[string]sample)
				for _, name := range []string{first, second} {
					s, err := runOne(ctx, bin, name, c, *benchtime)
					if err != nil {
						return err
					}
					got[name] = s
				}
				k := cell{p, c}
				results[k] = append(results[k], sample{
					ns: got[p.a].ns, allocs: got[p.a].allocs,
					baseNS: got[p.b].ns, baseAllocs: got[p.b].allocs,
				})
			}
		}
		fmt.Fprintf(os.Stderr, "round %d of %d done (%s)\n", r+1, *rounds, time.Since(started).Round(time.Second))
	}

	var buf bytes.Buffer
	report(&buf, pairs, cpuList, results, *rounds, *benchtime, *pkg, started)
	if *out != "" {
		if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	_, err = stdout.Write(buf.Bytes())
	return err
}

type cell struct {
	p   pair
	cpu int
}

// sample is one round of one pair: the benchmark's and the baseline's
// ns/op and allocs/op.
type sample struct {
	ns, baseNS         float64
	allocs, baseAllocs float64
}

func (s sample) ratio() float64 { return s.ns / s.baseNS }

// benchLine matches a benchmark result line: name (with its -cpu suffix),
// iterations, ns/op and, with ReportAllocs, allocs/op.
var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:.*?\s([\d.]+) allocs/op)?`)

// runOne runs the benchmark name alone at GOMAXPROCS cpu and returns its
// figures.
func runOne(ctx context.Context, bin, name string, cpu int, benchtime string) (sample, error) {
	cmd := exec.CommandContext(ctx, bin, "-test.run", "^$", "-test.bench", benchPattern(name),
		"-test.benchmem", "-test.cpu", strconv.Itoa(cpu), "-test.benchtime", benchtime, "-test.count", "1")
	cmd.Dir = filepath.Dir(bin)
	outb, err := cmd.CombinedOutput()
	if err != nil {
		return sample{}, fmt.Errorf("%s at cpu %d: %w\n%s", name, cpu, err, outb)
	}
	sc := bufio.NewScanner(bytes.NewReader(outb))
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != name {
			continue
		}
		ns, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return sample{}, err
		}
		allocs := -1.0
		if m[3] != "" {
			if allocs, err = strconv.ParseFloat(m[3], 64); err != nil {
				return sample{}, err
			}
		}
		return sample{ns: ns, allocs: allocs}, nil
	}
	return sample{}, fmt.Errorf("%s at cpu %d: no result in the output:\n%s", name, cpu, outb)
}

// benchPattern turns a benchmark name (without its Benchmark prefix) into
// the -test.bench pattern that selects exactly it: go test matches each
// slash-separated level of the pattern against the same level of a name,
// unanchored, so each level is quoted and anchored.
func benchPattern(name string) string {
	parts := strings.Split("Benchmark"+name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

func report(w io.Writer, pairs []pair, cpus []int, results map[cell][]sample, rounds int, benchtime, pkg string, started time.Time) {
	host, _ := os.Hostname()
	fmt.Fprintf(w, "# pairbench: %s\n\n", pkg)
	fmt.Fprintf(w, "%s UTC, host %s, %d rounds of -benchtime %s, each pair run back to back, alternating which goes first.\n\n",
		started.UTC().Format("2006-01-02 15:04"), host, rounds, benchtime)
	fmt.Fprintln(w, "| benchmark / baseline | cpu | ns/op (median) | baseline ns/op (median) | ratio: median [min–max] | rounds ≤ target | allocs/op | verdict |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---|---:|---:|---|")
	for _, p := range pairs {
		for _, c := range cpus {
			ss := results[cell{p, c}]
			if len(ss) == 0 {
				continue
			}
			var ns, base, ratios []float64
			allocs := 0.0
			within := 0
			for _, s := range ss {
				ns, base, ratios = append(ns, s.ns), append(base, s.baseNS), append(ratios, s.ratio())
				allocs = max(allocs, s.allocs)
				if p.target > 0 && s.ratio() <= p.target {
					within++
				}
			}
			verdict, count := "", ""
			if p.target > 0 {
				count = fmt.Sprintf("%d of %d", within, len(ss))
				verdict = fmt.Sprintf("missed (target ≤ %.2g×)", p.target)
				if median(ratios) <= p.target {
					verdict = fmt.Sprintf("met (target ≤ %.2g×)", p.target)
				}
			}
			fmt.Fprintf(w, "| %s / %s | %d | %.1f | %.1f | %.2f× [%.2f–%.2f] | %s | %g | %s |\n",
				p.a, p.b, c, median(ns), median(base), median(ratios), slices.Min(ratios), slices.Max(ratios), count, allocs, verdict)
		}
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func parsePairs(specs []string) ([]pair, error) {
	var pairs []pair
	for _, spec := range specs {
		var p pair
		body, target, hasTarget := strings.Cut(spec, "@")
		a, b, ok := strings.Cut(body, "=")
		if !ok || a == "" || b == "" {
			return nil, fmt.Errorf("-pair %q: want BenchA=BenchB[@target]", spec)
		}
		p.a, p.b = strings.TrimPrefix(a, "Benchmark"), strings.TrimPrefix(b, "Benchmark")
		if hasTarget {
			t, err := strconv.ParseFloat(target, 64)
			if err != nil || t <= 0 {
				return nil, fmt.Errorf("-pair %q: the target must be a positive ratio", spec)
			}
			p.target = t
		}
		pairs = append(pairs, p)
	}
	return pairs, nil
}
