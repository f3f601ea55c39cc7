package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-gw/sluice/gateway/simulate"
)

// docsFile is the page, relative to the docs directory, whose generated
// blocks updateDocs rewrites.
const docsFile = "algorithms.md"

// docEntry is one generated block of docs/algorithms.md: the output of
// `sluice simulate ARGS` and, if chart is set, its chart as img/NAME.svg.
type docEntry struct {
	name  string
	args  string
	chart bool
	// accuracy, if set, makes the block a table of the sliding-window
	// counter's and the fixed window's errors against the exact log, one row
	// per command (each runs sliding_window, sliding_log and fixed_window).
	accuracy []string
}

// docEntries are the generated blocks, in page order. Each block sits
// between the lines "<!-- simulate:NAME -->" and "<!-- /simulate:NAME -->".
var docEntries = []docEntry{
	{name: "boundary", chart: true,
		args: "--compare --limit 10 --window 1s --pattern boundary --step 100ms --table=false"},
	{name: "token-bucket", chart: true,
		args: "--policy token_bucket:capacity=10,rate=2 --policy gcra:burst=10,rate=2 --policy fixed_window:limit=10,window=5s --pattern steady --rps 20 --duration 10s --step 250ms --table=false"},
	{name: "leaky-shape", chart: true,
		args: "--policy leaky_bucket:capacity=10,rate=5 --policy leaky_bucket:capacity=10,rate=5,mode=shape --pattern burst --count 10 --period 2s --duration 8s --step 200ms --table=false"},
	{name: "sliding-window", chart: true,
		args: "--policy sliding_window:limit=10,window=1s --policy sliding_log:limit=10,window=1s --policy fixed_window:limit=10,window=1s --pattern poisson --rps 12 --duration 20s --step 250ms --seed 7 --table=false"},
	{name: "accuracy", accuracy: []string{
		"--policy sliding_window:limit=100,window=1m --policy sliding_log:limit=100,window=1m --policy fixed_window:limit=100,window=1m --pattern poisson --rps 0.8333 --duration 300000s --seed 1 --step 1h --table=false",
		"--policy sliding_window:limit=100,window=1m --policy sliding_log:limit=100,window=1m --policy fixed_window:limit=100,window=1m --pattern poisson --rps 1.5 --duration 166667s --seed 2 --step 1h --table=false",
		"--policy sliding_window:limit=100,window=1m --policy sliding_log:limit=100,window=1m --policy fixed_window:limit=100,window=1m --pattern poisson --rps 1.6667 --duration 150000s --seed 3 --step 1h --table=false",
		"--policy sliding_window:limit=100,window=1m --policy sliding_log:limit=100,window=1m --policy fixed_window:limit=100,window=1m --pattern poisson --rps 3.3333 --duration 75000s --seed 4 --step 1h --table=false",
	}},
}

// generate runs one entry: the block's text and the SVG chart (nil without
// a chart).
func (e docEntry) generate() (block string, svg []byte, err error) {
	if e.accuracy != nil {
		block, err := accuracyTable(e.accuracy)
		return block, nil, err
	}
	rep, o, err := simulateArgs(e.args)
	if err != nil {
		return "", nil, fmt.Errorf("docs %s: %w", e.name, err)
	}
	var text, chart bytes.Buffer
	if err := rep.WriteText(&text, o.table); err != nil {
		return "", nil, err
	}
	var b strings.Builder
	cmd := "sluice simulate " + e.args
	if e.chart {
		if err := rep.WriteChart(&chart, simulate.SVG); err != nil {
			return "", nil, fmt.Errorf("docs %s: %w", e.name, err)
		}
		svg = chart.Bytes()
		cmd += " --svg docs/img/" + e.name + ".svg"
		fmt.Fprintf(&b, "![sluice simulate %s](img/%s.svg)\n\n", e.name, e.name)
	}
	fmt.Fprintf(&b, "```sh\n%s\n```\n\n```text\n%s```\n", cmd, text.String())
	return b.String(), svg, nil
}

// simulateArgs runs the simulation that `sluice simulate args` runs.
func simulateArgs(args string) (*simulate.Report, *simOpts, error) {
	o := &simOpts{}
	fs := o.flags()
	fs.SetOutput(io.Discard)
	if err := fs.Parse(strings.Fields(args)); err != nil {
		return nil, nil, err
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	sim, err := o.simulation(nil)
	if err != nil {
		return nil, nil, err
	}
	rep, err := sim.Run()
	return rep, o, err
}

// accuracyTable runs each command and tabulates, per offered load, how
// often the sliding-window counter and the fixed window decide otherwise
// than an exact sliding log would on the same admitted history.
func accuracyTable(cmds []string) (string, error) {
	var b strings.Builder
	b.WriteString("```sh\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "sluice simulate %s\n", c)
	}
	b.WriteString("```\n\n")
	b.WriteString("| offered load | requests | policy | admitted | vs exact log | wrongly allowed | wrongly denied | wrong in all | most in any 1m |\n")
	b.WriteString("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	var total, wrong int64
	for _, c := range cmds {
		rep, _, err := simulateArgs(c)
		if err != nil {
			return "", fmt.Errorf("docs accuracy: %w", err)
		}
		if len(rep.Summaries) != 3 || rep.Summaries[1].Label != "sliding_log" {
			return "", fmt.Errorf("docs accuracy: %q must run sliding_window, sliding_log, fixed_window", c)
		}
		p := rep.Pattern
		ref := rep.Summaries[0].Limit
		load := fmt.Sprintf("%.2f × limit (%v/s)", p.RPS*rep.Summaries[0].Window.Seconds()/float64(ref), p.RPS)
		exact := rep.Summaries[1].Admitted // commands list sliding_window, sliding_log, fixed_window
		for i, s := range rep.Summaries {
			fmt.Fprintf(&b, "| %s | %d | %s | %d | %+.2f%% | %s | %s | %s | %d |\n", load, s.Requests, s.Label, s.Admitted,
				100*float64(s.Admitted-exact)/float64(exact),
				pct(s.WronglyAllowed, s.Requests), pct(s.WronglyDenied, s.Requests),
				pct(s.WronglyAllowed+s.WronglyDenied, s.Requests), s.MaxInWindow)
			if i == 0 { // the sliding-window counter
				total += s.Requests
				wrong += s.WronglyAllowed + s.WronglyDenied
			}
		}
	}
	fmt.Fprintf(&b, "\nOver all %d requests, the sliding-window counter decided %s of them otherwise than the exact log.\n",
		total, pct(wrong, total))
	return b.String(), nil
}

// pct formats n of total as "n (p%)".
func pct(n, total int64) string {
	return fmt.Sprintf("%d (%.4f%%)", n, 100*float64(n)/float64(total))
}

// docMarkers returns the lines that open and close an entry's block.
func docMarkers(name string) (open, end string) {
	return "<!-- simulate:" + name + " -->\n", "<!-- /simulate:" + name + " -->"
}

// replaceBlock returns page with the body of block name replaced.
func replaceBlock(page, name, body string) (string, error) {
	open, end := docMarkers(name)
	i := strings.Index(page, open)
	j := strings.Index(page, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("%s: no block %q...%q", docsFile, strings.TrimSpace(open), end)
	}
	return page[:i+len(open)] + body + page[j:], nil
}

// docsState generates every entry and returns the page as it should be and
// the charts (file name under img/ → SVG).
func docsState(dir string, entries []docEntry) (page string, charts map[string][]byte, err error) {
	b, err := os.ReadFile(filepath.Join(dir, docsFile))
	if err != nil {
		return "", nil, err
	}
	page, charts = string(b), map[string][]byte{}
	for _, e := range entries {
		body, svg, err := e.generate()
		if err != nil {
			return "", nil, err
		}
		if page, err = replaceBlock(page, e.name, body); err != nil {
			return "", nil, err
		}
		if svg != nil {
			charts[e.name+".svg"] = svg
		}
	}
	return page, charts, nil
}

// updateDocs regenerates the simulation outputs and charts of
// dir/algorithms.md (dir is the docs directory): it rewrites the page's
// generated blocks and dir/img/*.svg.
func updateDocs(dir string) error { return updateEntries(dir, docEntries) }

func updateEntries(dir string, entries []docEntry) error {
	page, charts, err := docsState(dir, entries)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "img"), 0o755); err != nil {
		return err
	}
	for name, svg := range charts {
		if err := os.WriteFile(filepath.Join(dir, "img", name), svg, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, docsFile), []byte(page), 0o644)
}

// checkDocs reports, joined, every generated block or chart of
// dir/algorithms.md that differs from what the code produces now.
func checkDocs(dir string) error { return checkEntries(dir, docEntries) }

func checkEntries(dir string, entries []docEntry) error {
	page, charts, err := docsState(dir, entries)
	if err != nil {
		return err
	}
	var errs []error
	have, err := os.ReadFile(filepath.Join(dir, docsFile))
	if err != nil {
		return err
	}
	if string(have) != page {
		errs = append(errs, fmt.Errorf("%s: generated blocks are stale", docsFile))
	}
	for name, svg := range charts {
		have, err := os.ReadFile(filepath.Join(dir, "img", name))
		if err != nil || !bytes.Equal(have, svg) {
			errs = append(errs, fmt.Errorf("img/%s is missing or stale", name))
		}
	}
	return errors.Join(errs...)
}
