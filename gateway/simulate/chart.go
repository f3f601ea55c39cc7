package simulate

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart formats.
const (
	SVG = "svg"
	PNG = "png"
)

// panel is the data of one policy's chart panel, exactly as it is handed to
// the plotters (so tests can check what is drawn).
type panel struct {
	title string
	// forwarded: one bin per step, weight = requests forwarded in it.
	forwarded []plotter.HistogramBin
	// total: one bin per step, weight = forwarded + denied; drawn behind
	// forwarded, so its visible top part is the denied requests.
	total []plotter.HistogramBin
	// peak: the most units of one key forwarded in the trailing W, per step.
	peak plotter.XYs
	// limit: the policy's limit, a horizontal line.
	limit plotter.XYs
}

// panels returns the chart data of every policy.
func (r *Report) panels() []panel {
	end := r.End.Seconds()
	ps := make([]panel, len(r.Summaries))
	for i, s := range r.Summaries {
		p := panel{title: s.Policy}
		if alg := r.Results[i].Policy.Algorithm(); s.Label != string(alg) && s.Label != string(alg)+"/shape" {
			p.title = s.Label + ": " + s.Policy
		}
		for _, b := range r.Timelines[i] {
			lo, hi := b.Start.Seconds(), (b.Start + r.Step).Seconds()
			p.forwarded = append(p.forwarded, plotter.HistogramBin{Min: lo, Max: hi, Weight: float64(b.Out)})
			p.total = append(p.total, plotter.HistogramBin{Min: lo, Max: hi, Weight: float64(b.Out + b.Denied)})
			p.peak = append(p.peak, plotter.XY{X: lo, Y: float64(b.Peak)})
		}
		if n := len(p.peak); n > 0 {
			p.peak = append(p.peak, plotter.XY{X: end, Y: p.peak[n-1].Y})
		}
		p.limit = plotter.XYs{{X: 0, Y: float64(s.Limit)}, {X: end, Y: float64(s.Limit)}}
		ps[i] = p
	}
	return ps
}

var (
	colForwarded = color.RGBA{R: 0x3b, G: 0x75, B: 0xaf, A: 0xff}
	colDenied    = color.RGBA{R: 0xe4, G: 0x6c, B: 0x5a, A: 0xff}
	colPeak      = color.RGBA{A: 0xff}
	colLimit     = color.RGBA{R: 0x77, G: 0x77, B: 0x77, A: 0xff}
)

// plots builds one plot per panel, on shared axes, and the legends that
// go above them.
func (r *Report) plots(ps []panel) (_ []*plot.Plot, legend []plot.Legend, err error) {
	ymax := 1.0
	for _, p := range ps {
		for i := range p.total {
			ymax = max(ymax, p.total[i].Weight, p.peak[i].Y)
		}
		ymax = max(ymax, p.limit[0].Y)
	}
	ymax *= 1.25
	out := make([]*plot.Plot, len(ps))
	for i, p := range ps {
		pl := plot.New()
		pl.Title.Text = p.title
		pl.Title.TextStyle.Font.Size = vg.Points(10)
		pl.X.Min, pl.X.Max = 0, r.End.Seconds()
		pl.Y.Min, pl.Y.Max = 0, ymax
		pl.Y.Label.Text = "requests"
		if i == len(ps)-1 {
			pl.X.Label.Text = "time (s)"
		}
		total := &plotter.Histogram{Bins: p.total, Width: r.Step.Seconds(), FillColor: colDenied}
		fwd := &plotter.Histogram{Bins: p.forwarded, Width: r.Step.Seconds(), FillColor: colForwarded}
		total.LineStyle.Width, fwd.LineStyle.Width = 0, 0
		peak, err := plotter.NewLine(p.peak)
		if err != nil {
			return nil, nil, fmt.Errorf("chart %s: %w", p.title, err)
		}
		peak.StepStyle = plotter.PostStep
		peak.Color, peak.Width = colPeak, vg.Points(1)
		limit, err := plotter.NewLine(p.limit)
		if err != nil {
			return nil, nil, fmt.Errorf("chart %s: %w", p.title, err)
		}
		limit.Color, limit.Width, limit.Dashes = colLimit, vg.Points(1), []vg.Length{vg.Points(4), vg.Points(3)}
		pl.Add(total, fwd, peak, limit)
		if i == 0 {
			legend = []plot.Legend{plot.NewLegend(), plot.NewLegend()}
			legend[0].Left, legend[0].Top = true, true
			legend[0].Add("forwarded per step", fwd)
			legend[0].Add("denied per step", total)
			legend[1].Top = true
			legend[1].Add("most units of one key forwarded in the trailing window W", peak)
			legend[1].Add("limit", limit)
			for j := range legend {
				legend[j].TextStyle.Font.Size = vg.Points(9)
			}
		}
		out[i] = pl
	}
	return out, legend, nil
}

// WriteChart draws the report as a chart in format SVG or PNG: one panel per
// policy, stacked on shared axes, each showing per step the requests
// forwarded (blue) and denied (red), the most units of one key forwarded in
// the trailing window W (black steps) and the limit (dashed).
func (r *Report) WriteChart(w io.Writer, format string) error {
	ps := r.panels()
	pls, legend, err := r.plots(ps)
	if err != nil {
		return err
	}
	const strip = 0.45 * vg.Inch // the legends, above the panels
	width, height := 8*vg.Inch, vg.Length(len(ps))*1.7*vg.Inch+0.3*vg.Inch+strip
	var c vg.CanvasSizer
	var wt io.WriterTo
	switch format {
	case SVG:
		s := vgsvg.New(width, height)
		c, wt = s, s
	case PNG:
		img := vgimg.New(width, height)
		c, wt = img, vgimg.PngCanvas{Canvas: img}
	default:
		return fmt.Errorf("unknown chart format %q (svg or png)", format)
	}
	grid := make([][]*plot.Plot, len(pls))
	for i, p := range pls {
		grid[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(pls), Cols: 1, PadY: vg.Points(6), PadTop: vg.Points(4), PadBottom: vg.Points(4),
		PadLeft: vg.Points(4), PadRight: vg.Points(12)}
	full := draw.New(c)
	cs := plot.Align(grid, tiles, draw.Crop(full, 0, 0, 0, -strip))
	for i, p := range pls {
		p.Draw(cs[i][0])
	}
	top := draw.Crop(full, vg.Points(8), -vg.Points(12), height-strip, -vg.Points(4))
	for i := range legend {
		legend[i].Draw(top)
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("write %s chart: %w", format, err)
	}
	return nil
}
