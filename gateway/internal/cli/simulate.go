package cli

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/simulate"
	"github.com/sluice-gw/sluice/ratelimit"
)

// simulateUsage is the help text of `sluice simulate`.
const simulateUsage = `usage: sluice simulate [policies] [traffic] [output]

policies (one of):
  --policy ALG:FIELD=V,...   a policy; repeat for several, e.g.
                             --policy token_bucket:capacity=10,rate=1 --policy sliding_log:limit=10,window=1s
  --algorithm ALG --limit N --window D --capacity N --burst N --rate R --mode M --max-delay D
                             one policy from single flags
  --config FILE [--policy NAME]...
                             policies of a sluice config file (all of them without --policy)
  --compare [--limit L] [--window W]
                             all six algorithms with equivalent parameters (defaults L=10, W=1s):
                             windows limit=L, window=W; token_bucket capacity=L, rate=L/W;
                             gcra burst=L, rate=L/W; leaky_bucket capacity=L, rate=L/W, police and shape
  --measure D                W of "max admitted in any window W" (default: the compare window,
                             else each policy's period: window, or capacity/rate)

traffic:
  --pattern P     steady | burst | boundary | onoff | poisson | trace (default steady)
  --duration D    how long requests arrive (default 10s; boundary: 3 windows)
  --rps R         requests per second for steady, onoff, poisson (default 10)
  --count N       burst size; boundary: requests on each side (default: the first policy's limit)
  --period D      repeat a burst every D (default: once)
  --spread D      boundary: length of each side (default W/10)
  --on D --off D  onoff phases (default 1s each)
  --seed N        poisson seed (default 1); the same seed gives the same output
  --cost N        cost of each generated request (default 1)
  --hold D        how long each admitted request stays in flight (default 0: ends as it
                  arrives); what a concurrency policy counts, e.g.
                  --algorithm concurrency --limit 5 --hold 2s
  --trace FILE    CSV rows time,key,cost (time in seconds or as a duration)

output:
  --step D        timeline step (default 1s; boundary: the spread, W/10)
  --table=false   summary only, no timeline
  --svg FILE      write a chart (one panel per policy) as SVG
  --png FILE      write the chart as PNG
  --docs DIR      regenerate the charts and outputs of DIR/algorithms.md and exit
`

// runSimulate runs `sluice simulate` with args (the words after
// "simulate"), writing the report to env.Stdout and problems to env.Stderr,
// and returns the exit code: exitOK; exitError for a config or trace file
// that cannot be used or a failed run; exitUsage for bad flags or flag values
// (policy, pattern, durations). env.LookupEnv resolves ${NAME} in a config
// file; nil means no variables are set.
func runSimulate(args []string, env Env) int {
	stdout, stderr, lookup := env.Stdout, env.Stderr, env.LookupEnv
	var o simOpts
	fs := o.flags()
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, simulateUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "sluice simulate: %v\n\n%s", err, simulateUsage)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice simulate: unexpected argument %q\n\n%s", fs.Arg(0), simulateUsage)
		return exitUsage
	}
	if o.docs != "" {
		if err := updateDocs(o.docs); err != nil {
			fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
			return exitError
		}
		return exitOK
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if err := explicitZero(fs, o.set); err != nil {
		fmt.Fprintf(stderr, "sluice simulate: %v\n\n%s", err, simulateUsage)
		return exitUsage
	}
	sim, err := o.simulation(lookup)
	if err != nil {
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintf(stderr, "sluice simulate: %v\n\n%s", err, simulateUsage)
			return exitUsage
		}
		fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
		return exitError
	}
	if err := o.run(sim, stdout); err != nil {
		fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
		return exitError
	}
	return exitOK
}

// positiveFlags are the flags whose zero value stands for "not given" (a
// default, or a value derived from other flags): written as zero, they are
// refused rather than silently replaced.
var positiveFlags = []string{"duration", "step", "cost", "count", "limit", "capacity", "burst",
	"window", "measure", "period", "on", "off", "max-delay"}

// explicitZero returns an error for the first flag of positiveFlags given
// (set) with the value zero.
func explicitZero(fs *flag.FlagSet, set map[string]bool) error {
	for _, name := range positiveFlags {
		f := fs.Lookup(name)
		if f == nil || !set[name] {
			continue
		}
		switch v := f.Value.(flag.Getter).Get().(type) {
		case time.Duration:
			if v == 0 {
				return usageError{fmt.Sprintf("--%s must be positive, got 0s", name)}
			}
		case int64:
			if v == 0 {
				return usageError{fmt.Sprintf("--%s must be positive, got 0", name)}
			}
		}
	}
	return nil
}

// usageError is a problem with the flags themselves.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// simOpts holds the parsed flags of `sluice simulate`.
type simOpts struct {
	policies                      multi
	config, algorithm, mode, rate string
	compare, table                bool
	limit, capacity, burst        int64
	window, maxDelay, measure     time.Duration
	pattern, trace                string
	duration, period, spread      time.Duration
	on, off, step                 time.Duration
	rps                           float64
	count, cost                   int64
	hold                          time.Duration
	seed                          uint64
	svg, png, docs                string
	set                           map[string]bool
}

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, " ") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func (o *simOpts) flags() *flag.FlagSet {
	o.set = map[string]bool{}
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.Var(&o.policies, "policy", "")
	fs.StringVar(&o.config, "config", "", "")
	fs.BoolVar(&o.compare, "compare", false, "")
	fs.StringVar(&o.algorithm, "algorithm", "", "")
	fs.Int64Var(&o.limit, "limit", 0, "")
	fs.Int64Var(&o.capacity, "capacity", 0, "")
	fs.Int64Var(&o.burst, "burst", 0, "")
	fs.StringVar(&o.rate, "rate", "", "")
	fs.DurationVar(&o.window, "window", 0, "")
	fs.StringVar(&o.mode, "mode", "", "")
	fs.DurationVar(&o.maxDelay, "max-delay", 0, "")
	fs.DurationVar(&o.measure, "measure", 0, "")
	fs.StringVar(&o.pattern, "pattern", simulate.Steady, "")
	fs.DurationVar(&o.duration, "duration", 0, "")
	fs.Float64Var(&o.rps, "rps", 10, "")
	fs.Int64Var(&o.count, "count", 0, "")
	fs.DurationVar(&o.period, "period", 0, "")
	fs.DurationVar(&o.spread, "spread", 0, "")
	fs.DurationVar(&o.on, "on", time.Second, "")
	fs.DurationVar(&o.off, "off", time.Second, "")
	fs.Uint64Var(&o.seed, "seed", 1, "")
	fs.Int64Var(&o.cost, "cost", 1, "")
	fs.DurationVar(&o.hold, "hold", 0, "")
	fs.StringVar(&o.trace, "trace", "", "")
	fs.DurationVar(&o.step, "step", time.Second, "")
	fs.BoolVar(&o.table, "table", true, "")
	fs.StringVar(&o.svg, "svg", "", "")
	fs.StringVar(&o.png, "png", "", "")
	fs.StringVar(&o.docs, "docs", "", "")
	return fs
}

// specs builds the policies the flags ask for.
func (o *simOpts) specs(lookup func(string) (string, bool)) ([]simulate.Spec, error) {
	single := o.algorithm != "" || o.capacity != 0 || o.burst != 0 || o.rate != "" || o.mode != "" || o.maxDelay != 0 ||
		(!o.compare && (o.limit != 0 || o.window != 0))
	ways := 0
	for _, b := range []bool{o.compare, single, o.config != "", len(o.policies) > 0 && o.config == ""} {
		if b {
			ways++
		}
	}
	switch {
	case ways == 0:
		return nil, usageError{"no policy: give --policy, --algorithm, --config or --compare"}
	case ways > 1:
		return nil, usageError{"give policies one way only: --policy, --algorithm and its fields, --config, or --compare"}
	}
	var specs []simulate.Spec
	var err error
	switch {
	case o.compare:
		l, w := o.limit, o.window
		if l == 0 {
			l = 10
		}
		if w == 0 {
			w = time.Second
		}
		specs, err = simulate.CompareSpecs(l, w)
	case single:
		specs, err = o.singleSpec()
	case o.config != "":
		specs, err = configSpecs(o.config, o.policies, lookup)
	default:
		for _, s := range o.policies {
			sp, perr := parsePolicy(s)
			if perr != nil {
				return nil, usageError{perr.Error()}
			}
			specs = append(specs, sp)
		}
	}
	if err != nil {
		if o.config != "" {
			return nil, err // the file's problem, not the flags'
		}
		return nil, usageError{err.Error()}
	}
	if o.measure != 0 {
		if o.measure < time.Microsecond {
			return nil, usageError{fmt.Sprintf("--measure must be at least 1µs, got %v", o.measure)}
		}
		for i := range specs {
			specs[i].Window = o.measure
		}
	}
	return specs, nil
}

// singleSpec builds the policy of --algorithm and its field flags.
func (o *simOpts) singleSpec() ([]simulate.Spec, error) {
	c := ratelimit.PolicyConfig{Algorithm: ratelimit.Algorithm(o.algorithm), Limit: o.limit, Capacity: o.capacity,
		Burst: o.burst, Window: o.window, Mode: ratelimit.Mode(o.mode), MaxDelay: o.maxDelay}
	if o.rate != "" {
		r, err := config.ParseRate(o.rate)
		if err != nil {
			return nil, err
		}
		c.Rate = r
	}
	p, err := ratelimit.NewPolicy(c)
	if err != nil {
		return nil, err
	}
	return []simulate.Spec{{Label: simulate.Label(p), Policy: p}}, nil
}

// configSpecs loads the named policies (all if names is empty) of a config file.
func configSpecs(path string, names []string, lookup func(string) (string, bool)) ([]simulate.Spec, error) {
	cfg, err := config.Load(path, lookup)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		names = cfg.PolicyNames()
	}
	var specs []simulate.Spec
	for _, n := range names {
		p := cfg.Policy(n)
		if p == nil {
			return nil, fmt.Errorf("%s: no policy %q (defined: %s)", path, n, strings.Join(cfg.PolicyNames(), ", "))
		}
		specs = append(specs, simulate.Spec{Label: n, Policy: p})
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("%s defines no policies", path)
	}
	return specs, nil
}

// simulation builds the Simulation the flags describe.
func (o *simOpts) simulation(lookup func(string) (string, bool)) (simulate.Simulation, error) {
	specs, err := o.specs(lookup)
	if err != nil {
		return simulate.Simulation{}, err
	}
	first := specs[0]
	p := simulate.Pattern{Kind: o.pattern, Duration: o.duration, RPS: o.rps, Count: o.count, Period: o.period,
		Spread: o.spread, On: o.on, Off: o.off, Seed: o.seed, Cost: o.cost, Hold: o.hold}
	if p.Count == 0 {
		p.Count = first.Policy.Max()
	}
	if p.Kind == simulate.Boundary {
		p.Window = first.MeasureWindow()
	}
	if p.Duration == 0 {
		p.Duration = 10 * time.Second
		if p.Kind == simulate.Boundary {
			p.Duration = 3 * p.Window
		}
	}
	sim := simulate.Simulation{Pattern: p, Specs: specs, Step: o.step}
	if p.Kind == simulate.Boundary && !o.set["step"] {
		// A step as long as one side of the attack (the spread, W/10 by
		// default) puts each burst in a row of its own; a 1s step would hide
		// a boundary burst of a short window inside one row.
		sim.Step = max(cmp.Or(p.Spread, p.Window/10), time.Microsecond)
	}
	if (o.trace != "") != (p.Kind == simulate.Trace) {
		return simulate.Simulation{}, usageError{"--trace FILE goes with --pattern trace"}
	}
	if o.step < time.Microsecond {
		return simulate.Simulation{}, usageError{fmt.Sprintf("--step must be at least 1µs, got %v", o.step)}
	}
	if p.Kind != simulate.Trace {
		// The flags describe the pattern: a pattern they cannot make is a
		// simulateUsage error, found before the run.
		if _, err := p.Events(); err != nil {
			return simulate.Simulation{}, usageError{"pattern: " + err.Error()}
		}
	}
	if o.trace != "" {
		f, err := os.Open(o.trace)
		if err != nil {
			return simulate.Simulation{}, err
		}
		defer f.Close()
		ev, err := simulate.ReadTrace(f)
		if err != nil {
			return simulate.Simulation{}, fmt.Errorf("%s: %w", o.trace, err)
		}
		sim.Pattern.Recorded, sim.Source = ev, o.trace
		if !o.set["duration"] {
			sim.Pattern.Duration = 0
		}
	}
	return sim, nil
}

// run simulates and writes the report and charts.
func (o *simOpts) run(sim simulate.Simulation, stdout io.Writer) error {
	rep, err := sim.Run()
	if err != nil {
		return err
	}
	for _, c := range []struct{ file, format string }{{o.svg, simulate.SVG}, {o.png, simulate.PNG}} {
		if c.file == "" {
			continue
		}
		var buf bytes.Buffer
		if err := rep.WriteChart(&buf, c.format); err != nil {
			return err
		}
		if err := os.WriteFile(c.file, buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return rep.WriteText(stdout, o.table)
}

// parsePolicy parses a policy written on the command line as
// ALGORITHM[:FIELD=VALUE,...], for example
// "token_bucket:capacity=10,rate=1" or "sliding_log:limit=100,window=1m".
// Fields are those of a config file's policy (capacity, limit, burst, rate,
// window, mode, max_delay) plus name, the label in reports. Rates take the
// config forms: 10, 0.5, 100/1m, 5/s.
func parsePolicy(s string) (simulate.Spec, error) {
	alg, fields, _ := strings.Cut(s, ":")
	c := ratelimit.PolicyConfig{Algorithm: ratelimit.Algorithm(strings.TrimSpace(alg))}
	var errs []error
	if strings.TrimSpace(fields) != "" {
		seen := map[string]bool{}
		for _, f := range strings.Split(fields, ",") {
			k, _, _ := strings.Cut(f, "=")
			if k = strings.TrimSpace(k); seen[k] {
				errs = append(errs, fmt.Errorf("%s given twice", k))
				continue
			}
			seen[k] = true
			if err := setField(&c, f); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return simulate.Spec{}, fmt.Errorf("policy %q: %w", s, errors.Join(errs...))
	}
	p, err := ratelimit.NewPolicy(c)
	if err != nil {
		return simulate.Spec{}, fmt.Errorf("policy %q: %w", s, err)
	}
	return simulate.Spec{Label: simulate.Label(p), Policy: p}, nil
}

// setField sets one FIELD=VALUE of c.
func setField(c *ratelimit.PolicyConfig, f string) error {
	k, v, ok := strings.Cut(f, "=")
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	if !ok || v == "" {
		return fmt.Errorf("%q: want FIELD=VALUE", f)
	}
	amount := func(dst *int64) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not a whole number", k, v)
		}
		*dst = n
		return nil
	}
	duration := func(dst *time.Duration) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s: %q is not a duration (write e.g. 1s, 100ms, 1m)", k, v)
		}
		*dst = d
		return nil
	}
	switch k {
	case "name":
		c.Name = v
	case "capacity":
		return amount(&c.Capacity)
	case "limit":
		return amount(&c.Limit)
	case "burst":
		return amount(&c.Burst)
	case "rate":
		r, err := config.ParseRate(v)
		if err != nil {
			return err
		}
		c.Rate = r
	case "window":
		return duration(&c.Window)
	case "max_delay":
		return duration(&c.MaxDelay)
	case "lease_ttl":
		return duration(&c.LeaseTTL)
	case "mode":
		c.Mode = ratelimit.Mode(v)
	default:
		return fmt.Errorf("unknown field %q (name, capacity, limit, burst, rate, window, mode, max_delay, lease_ttl)", k)
	}
	return nil
}
