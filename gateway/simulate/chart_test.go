package simulate

import (
	"bytes"
	"fmt"
	"image/png"
	"strings"
	"testing"
	"time"
)

// boundaryReport runs --compare on the boundary pattern with limit l per w.
func boundaryReport(t *testing.T, l int64, w, step time.Duration) *Report {
	t.Helper()
	specs, err := CompareSpecs(l, w)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Simulation{
		Pattern: Pattern{Kind: Boundary, Window: w, Count: l, Duration: 3 * w},
		Specs:   specs,
		Step:    step,
	}.Run()
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestBoundaryCompare is the acceptance check: on the boundary
// pattern the fixed window admits 2L within one window length and the
// sliding log never more than L, in the summary, in the text and in the
// chart's data.
func TestBoundaryCompare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		l    int64
		w    time.Duration
		step time.Duration
	}{{10, time.Second, 100 * time.Millisecond}, {100, time.Minute, 5 * time.Second}, {3, 500 * time.Millisecond, 50 * time.Millisecond}} {
		t.Run(fmt.Sprintf("L=%d,W=%v", tc.l, tc.w), func(t *testing.T) {
			t.Parallel()
			rep := boundaryReport(t, tc.l, tc.w, tc.step)
			ps := rep.panels()
			for i, s := range rep.Summaries {
				chartPeak := 0.0
				for _, xy := range ps[i].peak {
					chartPeak = max(chartPeak, xy.Y)
				}
				switch s.Label {
				case "fixed_window":
					if s.MaxInWindow != 2*tc.l || chartPeak != float64(2*tc.l) {
						t.Errorf("fixed_window: max in any %v = %d (chart %v), want 2L = %d", tc.w, s.MaxInWindow, chartPeak, 2*tc.l)
					}
					if s.Admitted != 2*tc.l {
						t.Errorf("fixed_window admitted %d of the attack, want all %d", s.Admitted, 2*tc.l)
					}
				case "sliding_log":
					if s.MaxInWindow != tc.l || chartPeak != float64(tc.l) {
						t.Errorf("sliding_log: max in any %v = %d (chart %v), want L = %d", tc.w, s.MaxInWindow, chartPeak, tc.l)
					}
				}
				if s.Label != "fixed_window" && s.MaxInWindow > tc.l+tc.l/5+1 {
					t.Errorf("%s: max in any %v = %d, want about L = %d", s.Label, tc.w, s.MaxInWindow, tc.l)
				}
			}
			var text bytes.Buffer
			if err := rep.WriteText(&text, false); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{
				// policy limit W admitted denied max/W
				fmt.Sprintf("fixed_window %d %v %d 0 %d ", tc.l, tc.w, 2*tc.l, 2*tc.l),
				fmt.Sprintf("sliding_log %d %v %d %d %d ", tc.l, tc.w, tc.l, tc.l, tc.l),
			} {
				if !strings.Contains(squeeze(text.String()), want) {
					t.Errorf("summary lacks %q:\n%s", want, text.String())
				}
			}
		})
	}
}

// squeeze collapses runs of spaces, so tests do not depend on column widths.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestChartData checks that what each panel hands the plotters equals the
// simulated counts.
func TestChartData(t *testing.T) {
	t.Parallel()
	rep := boundaryReport(t, 10, time.Second, 100*time.Millisecond)
	ps := rep.panels()
	if len(ps) != 7 {
		t.Fatalf("got %d panels, want 7 (six algorithms, leaky in two modes)", len(ps))
	}
	for i, p := range ps {
		s, tl := rep.Summaries[i], rep.Timelines[i]
		var fwd, den float64
		for j, b := range tl {
			if p.forwarded[j].Weight != float64(b.Out) || p.total[j].Weight != float64(b.Out+b.Denied) || p.peak[j].Y != float64(b.Peak) {
				t.Errorf("%s bucket %v: drawn forwarded %v total %v peak %v, want %d, %d, %d",
					s.Label, b.Start, p.forwarded[j].Weight, p.total[j].Weight, p.peak[j].Y, b.Out, b.Out+b.Denied, b.Peak)
			}
			if p.forwarded[j].Min != b.Start.Seconds() || p.forwarded[j].Max != (b.Start+rep.Step).Seconds() {
				t.Errorf("%s bucket %v drawn over [%v, %v)", s.Label, b.Start, p.forwarded[j].Min, p.forwarded[j].Max)
			}
			fwd += p.forwarded[j].Weight
			den += p.total[j].Weight - p.forwarded[j].Weight
		}
		if fwd != float64(s.Admitted) || den != float64(s.Denied) {
			t.Errorf("%s: chart draws %v forwarded, %v denied; simulated %d admitted, %d denied", s.Label, fwd, den, s.Admitted, s.Denied)
		}
		if p.limit[0].Y != 10 {
			t.Errorf("%s: limit line at %v, want 10", s.Label, p.limit[0].Y)
		}
	}
	// The attack: 10 requests in [0.9s, 1s) and 10 in [1s, 1.1s).
	fw, sl := ps[0], ps[2]
	if got := []float64{fw.forwarded[9].Weight, fw.forwarded[10].Weight}; got[0] != 10 || got[1] != 10 {
		t.Errorf("fixed_window forwarded %v in the buckets at 0.9s and 1s, want [10 10]", got)
	}
	if got := []float64{sl.forwarded[10].Weight, sl.total[10].Weight}; got[0] != 0 || got[1] != 10 {
		t.Errorf("sliding_log at 1s: forwarded %v of %v, want 0 of 10", got[0], got[1])
	}
}

func TestChartRenders(t *testing.T) {
	t.Parallel()
	rep := boundaryReport(t, 10, time.Second, 100*time.Millisecond)
	var svg, img bytes.Buffer
	if err := rep.WriteChart(&svg, SVG); err != nil {
		t.Fatal(err)
	}
	for _, title := range []string{"fixed_window(limit=10, window=1s)", "sliding_log(limit=10, window=1s)",
		"token_bucket(capacity=10, rate=10/s)", "leaky_bucket(capacity=10, rate=10/s, mode=shape)", "time (s)", "forwarded per step", "denied per step"} {
		if !strings.Contains(svg.String(), title) {
			t.Errorf("SVG lacks %q", title)
		}
	}
	var again bytes.Buffer
	if err := rep.WriteChart(&again, SVG); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(svg.Bytes(), again.Bytes()) {
		t.Errorf("two SVG renderings of one report differ")
	}
	if err := rep.WriteChart(&img, PNG); err != nil {
		t.Fatal(err)
	}
	m, err := png.Decode(&img)
	if err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	if b := m.Bounds(); b.Dx() < 500 || b.Dy() < 7*100 {
		t.Errorf("PNG is %v, want at least 500 wide and 100 high per panel", b)
	}
	if err := rep.WriteChart(&img, "gif"); err == nil {
		t.Errorf("WriteChart(gif) succeeded, want an error")
	}
}
