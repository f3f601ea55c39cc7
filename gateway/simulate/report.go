package simulate

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Simulation is a pattern of traffic and the policies to run it through.
type Simulation struct {
	// Pattern generates the traffic.
	Pattern Pattern
	// Source describes where a trace came from (its file name), for the report.
	Source string
	// Specs are the policies, each run on its own store; repeated labels get
	// "#2", "#3"… appended.
	Specs []Spec
	// Step is the width of a timeline bucket; zero means one second.
	Step time.Duration
}

// Report is the outcome of a Simulation: the traffic, each policy's
// verdicts, timelines and summaries.
type Report struct {
	Simulation
	// Events is the traffic, in arrival order.
	Events []Event
	// Results holds each spec's verdicts, in spec order.
	Results []Result
	// End is the end of the timeline: a multiple of Step after the last
	// arrival, the last forwarding and the pattern's duration.
	End time.Duration
	// Timelines holds each spec's buckets over [0, End).
	Timelines [][]Bucket
	// Summaries holds each spec's summary.
	Summaries []Summary
}

// Run generates the traffic, runs it through every policy and counts the
// outcomes.
func (s Simulation) Run() (*Report, error) {
	if len(s.Specs) == 0 {
		return nil, fmt.Errorf("no policy to simulate")
	}
	if s.Step == 0 {
		s.Step = time.Second
	}
	if s.Step < time.Microsecond {
		return nil, fmt.Errorf("step must be at least 1µs, got %v", s.Step)
	}
	s.Specs = append([]Spec(nil), s.Specs...)
	uniqueLabels(s.Specs)
	ev, err := s.Pattern.Events()
	if err != nil {
		return nil, fmt.Errorf("pattern: %w", err)
	}
	res, err := Run(s.Specs, ev)
	if err != nil {
		return nil, err
	}
	r := &Report{Simulation: s, Events: ev, Results: res}
	r.End = endOf(res, ev, s.Pattern.Duration, s.Step)
	if n := r.End / s.Step; n > 1_000_000 {
		return nil, fmt.Errorf("step %v gives %d timeline buckets over %v; use a longer step", s.Step, n, r.End)
	}
	for _, x := range res {
		logs := forwarded(x, ev)
		tl := timeline(x, ev, logs, s.Step, r.End)
		r.Timelines = append(r.Timelines, tl)
		sum := summarize(x, logs, tl, s.Step)
		sum.MaxInFlight = maxInFlight(x, ev)
		r.Summaries = append(r.Summaries, sum)
	}
	return r, nil
}

// describe returns a one-line description of the traffic pattern.
func (r *Report) describe() string {
	p := r.Pattern
	cost := ""
	if p.Cost > 1 {
		cost = fmt.Sprintf(", cost %d each", p.Cost)
	}
	if p.Hold > 0 {
		cost += fmt.Sprintf(", each in flight for %v", p.Hold)
	}
	switch p.Kind {
	case Steady:
		return fmt.Sprintf("steady: %v requests/s%s", p.RPS, cost)
	case Burst:
		if p.Period == 0 {
			return fmt.Sprintf("burst: %d requests at once at 0s%s", p.Count, cost)
		}
		return fmt.Sprintf("burst: %d requests at once every %v%s", p.Count, p.Period, cost)
	case Boundary:
		spread := p.Spread
		if spread == 0 {
			spread = (p.Window / 10).Truncate(time.Microsecond)
		}
		return fmt.Sprintf("boundary: %d requests in the %v before the window boundary at %v and %d in the %v after%s",
			p.Count, spread, r.Events[p.Count].At, p.Count, spread, cost)
	case OnOff:
		return fmt.Sprintf("on/off: %v requests/s for %v, then %v off%s", p.RPS, p.On, p.Off, cost)
	case Poisson:
		return fmt.Sprintf("poisson: %v requests/s on average, seed %d%s", p.RPS, p.Seed, cost)
	default:
		if r.Source != "" {
			return "trace: " + r.Source
		}
		return "trace"
	}
}

// WriteText writes the report as text: the traffic, the policies, the
// timeline (if table is true) and the summary.
func (r *Report) WriteText(w io.Writer, table bool) error {
	var b strings.Builder
	keys := map[string]bool{}
	var units int64
	for _, e := range r.Events {
		keys[e.Key] = true
		units += e.Cost
	}
	fmt.Fprintf(&b, "pattern  %s\n", r.describe())
	fmt.Fprintf(&b, "traffic  %d requests (%d units) from %d %s over %v\n\n",
		len(r.Events), units, len(keys), plural(len(keys), "key", "keys"), r.End)
	pol := &textTable{left: map[int]bool{0: true, 1: true}}
	pol.add("policy", "rule", "W")
	for _, s := range r.Summaries {
		pol.add(s.Label, s.Policy, s.Window.String())
	}
	pol.write(&b)
	if table {
		b.WriteString("\n")
		r.writeTimeline(&b)
	}
	b.WriteString("\n")
	r.writeSummary(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTimeline writes one row per step.
func (r *Report) writeTimeline(b *strings.Builder) {
	fmt.Fprintf(b, "per %v: adm/den = arrivals admitted/denied, out = forwarded after shaping, peak = most units of one key forwarded in the trailing W\n", r.Step)
	t := &textTable{left: map[int]bool{0: true}}
	head := []string{"time", "sent"}
	type group struct {
		label      string
		first, end int // columns [first, end)
	}
	var groups []group
	for _, s := range r.Summaries {
		g := group{label: s.Label, first: len(head)}
		head = append(head, "adm", "den")
		if s.Shape {
			head = append(head, "out")
		}
		head = append(head, "peak")
		g.end = len(head)
		groups = append(groups, g)
	}
	t.add(head...)
	for i := range r.Timelines[0] {
		row := []string{r.Timelines[0][i].Start.String(), itoa(r.Timelines[0][i].Sent)}
		for j, s := range r.Summaries {
			x := r.Timelines[j][i]
			row = append(row, itoa(x.Admitted), itoa(x.Denied))
			if s.Shape {
				row = append(row, itoa(x.Out))
			}
			row = append(row, itoa(x.Peak))
		}
		t.add(row...)
	}
	wd := t.widths()
	var top strings.Builder
	col := 0
	for _, g := range groups {
		for ; col < g.first; col++ {
			top.WriteString(strings.Repeat(" ", wd[col]+2))
		}
		gw := 2 * (g.end - g.first - 1)
		for c := g.first; c < g.end; c++ {
			gw += wd[c]
		}
		if len(g.label) > gw {
			wd[g.end-1] += len(g.label) - gw
			gw = len(g.label)
		}
		top.WriteString(g.label + strings.Repeat(" ", gw-len(g.label)+2))
		col = g.end
	}
	b.WriteString(strings.TrimRight(top.String(), " ") + "\n")
	t.writeWidths(b, wd)
}

// writeSummary writes one row per policy.
func (r *Report) writeSummary(b *strings.Builder) {
	b.WriteString("summary: max/W = most units of one key forwarded in any window W; wrongly allowed/denied = verdicts an exact\n")
	b.WriteString("sliding log of (limit, W) would have given otherwise on the same admitted history\n")
	t := &textTable{left: map[int]bool{0: true}}
	t.add("policy", "limit", "W", "admitted", "denied", "max/W", "mean wait", "max wait", "out rate var", "wrongly allowed", "wrongly denied")
	for _, s := range r.Summaries {
		mean, maxw := "-", "-"
		if s.Shape {
			mean, maxw = s.MeanWait.String(), s.MaxWait.String()
		}
		t.add(s.Label, itoa(s.Limit), s.Window.String(), itoa(s.Admitted), itoa(s.Denied), itoa(s.MaxInWindow),
			mean, maxw, strconv.FormatFloat(s.OutRateVariance, 'f', 2, 64),
			share(s.WronglyAllowed, s.Requests), share(s.WronglyDenied, s.Requests))
	}
	t.write(b)
	inflight := false
	for _, s := range r.Summaries {
		inflight = inflight || s.MaxInFlight > 0
	}
	if !inflight {
		return
	}
	b.WriteString("\nin flight: the most admitted requests of one key running at once (each for its hold)\n")
	t = &textTable{left: map[int]bool{0: true}}
	t.add("policy", "limit", "max in flight")
	for _, s := range r.Summaries {
		t.add(s.Label, itoa(s.Limit), itoa(s.MaxInFlight))
	}
	t.write(b)
}

// share formats n of total as "n (p%)".
func share(n, total int64) string {
	if total == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%.4f%%)", n, 100*float64(n)/float64(total))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// textTable lays out rows in columns two spaces apart, right-aligned except
// the columns in left.
type textTable struct {
	rows [][]string
	left map[int]bool
}

func (t *textTable) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *textTable) widths() []int {
	var wd []int
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(wd) {
				wd = append(wd, 0)
			}
			wd[i] = max(wd[i], len([]rune(c)))
		}
	}
	return wd
}

func (t *textTable) write(b *strings.Builder) { t.writeWidths(b, t.widths()) }

func (t *textTable) writeWidths(b *strings.Builder, wd []int) {
	for _, r := range t.rows {
		var line strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", wd[i]-len([]rune(c)))
			if i > 0 {
				line.WriteString("  ")
			}
			if t.left[i] {
				line.WriteString(c + pad)
			} else {
				line.WriteString(pad + c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
}
