package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// systemColors keeps one color per system across every chart.
var systemColors = map[string]color.Color{
	sysTipkv:  color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	sysBadger: color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
	sysPebble: color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}, // grey
	sysGoque:  color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
	sysNaive:  color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}, // grey

	sysDque:     color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
	sysBigqueue: color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
	sysNATS:     color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}, // cyan

	sysRiver:      color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, // brown
	sysRiverTuned: color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}, // pink
}

func colorOf(system string) color.Color {
	if c, ok := systemColors[system]; ok {
		return c
	}
	return color.Black
}

// readCostChart draws a panel per read of t (columns) and working set
// (rows), each with a bar per system, in µs per read.
func readCostChart(t *table, title, out, name string) error {
	var ops, groups []string
	cells := map[string]row{}
	for _, r := range t.rows {
		if r.group == "" {
			continue
		}
		if !slices.Contains(ops, r.op) {
			ops = append(ops, r.op)
		}
		if !slices.Contains(groups, r.group) {
			groups = append(groups, r.group)
		}
		cells[r.group+"/"+r.op] = r
	}
	plots := make([][]*plot.Plot, len(groups))
	for gi, g := range groups {
		plots[gi] = make([]*plot.Plot, len(ops))
		for oi, op := range ops {
			p := plot.New()
			p.Title.Text = op + ", " + g
			p.Title.TextStyle.Font.Size = vg.Points(11)
			if oi == 0 {
				p.Y.Label.Text = "µs per read"
			}
			p.Y.Min = 0
			r := cells[g+"/"+op]
			top := 0.0
			for si, s := range t.systems {
				us := r.values[s] / 1e3
				top = max(top, us)
				bars, err := plotter.NewBarChart(plotter.Values{us}, vg.Points(26))
				if err != nil {
					return err
				}
				bars.XMin = float64(si)
				bars.Color = colorOf(s)
				bars.LineStyle.Width = 0
				p.Add(bars)
				at := us // where the value's label goes: above the bar and its whisker
				if len(r.times[s]) > 1 {
					lo, hi := quartiles(r.times[s])
					whisker, err := plotter.NewLine(plotter.XYs{{X: float64(si), Y: lo / 1e3}, {X: float64(si), Y: hi / 1e3}})
					if err != nil {
						return err
					}
					whisker.Width = vg.Points(1.5)
					p.Add(whisker)
					at = max(at, hi/1e3)
					top = max(top, at)
				}
				lbl, err := plotter.NewLabels(plotter.XYLabels{
					XYs:    plotter.XYs{{X: float64(si), Y: at}},
					Labels: []string{short(us)},
				})
				if err != nil {
					return err
				}
				for i := range lbl.TextStyle {
					lbl.TextStyle[i].XAlign = draw.XCenter
					lbl.TextStyle[i].Font.Size = vg.Points(8)
				}
				lbl.Offset.Y = vg.Points(2)
				p.Add(lbl)
			}
			p.Y.Max = top * 1.18
			p.Y.Tick.Marker = shortTicks{}
			p.NominalX(t.systems...)
			p.X.Tick.Label.Font.Size = vg.Points(8)
			plots[gi][oi] = p
		}
	}
	w := vg.Length(len(ops)) * 2.7 * vg.Inch
	h := vg.Length(len(groups))*2.6*vg.Inch + 0.5*vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	heading := dc
	heading.Min.Y = dc.Max.Y - 0.5*vg.Inch
	body := dc
	body.Max.Y = heading.Min.Y
	headStyle := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, vg.Points(14)), XAlign: draw.XCenter, YAlign: draw.YCenter, Handler: plot.DefaultTextHandler}
	heading.FillText(headStyle, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: (heading.Min.Y + heading.Max.Y) / 2},
		title+": median time per read by system (line: middle half of the rounds), lower is better")
	tiles := draw.Tiles{Rows: len(groups), Cols: len(ops), PadX: vg.Points(6), PadY: vg.Points(6), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	canvases := plot.Align(plots, tiles, body)
	for i := range plots {
		for j := range plots[i] {
			plots[i][j].Draw(canvases[i][j])
		}
	}
	return savePNG(img, filepath.Join(out, name))
}

func savePNG(img *vgimg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// dequeueChart draws the time of one dequeue against the items consumed
// at the queue's head, both axes logarithmic.
func dequeueChart(r *queuesResult, out, name string) error {
	// A log axis has no 0: the 0 level is drawn a decade below the
	// smallest other level and labelled 0.
	zeroAt := 1.0
	for _, c := range r.consumed {
		if c > 0 {
			zeroAt = float64(c) / 10
			break
		}
	}
	xOf := func(c float64) float64 {
		if c == 0 {
			return zeroAt
		}
		return c
	}
	p := plot.New()
	p.Title.Text = "Dequeue cost vs items already consumed at the head (mean per item; bar: middle half of the rounds)"
	p.X.Label.Text = "items consumed before the dequeue (log scale)"
	p.Y.Label.Text = "µs per dequeue (log scale)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	var xt []plot.Tick
	for _, c := range r.consumed {
		xt = append(xt, plot.Tick{Value: xOf(float64(c)), Label: thousands(c)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(xt)
	p.Y.Tick.Marker = logTicks{}
	lo, hi := math.Inf(1), 0.0
	for _, s := range r.systems {
		for _, pt := range r.dequeue[s] {
			lo, hi = min(lo, pt.y/1e3), max(hi, pt.y/1e3)
		}
	}
	for _, s := range r.systems {
		var xys plotter.XYs
		for _, pt := range r.dequeue[s] {
			xys = append(xys, plotter.XY{X: xOf(pt.x), Y: pt.y / 1e3})
		}
		if err := addLine(p, s, xys); err != nil {
			return err
		}
		for i, pt := range r.dequeue[s] {
			q := r.spread[s][i]
			bar, err := plotter.NewLine(plotter.XYs{{X: xOf(pt.x), Y: q.x / 1e3}, {X: xOf(pt.x), Y: q.y / 1e3}})
			if err != nil {
				return err
			}
			bar.Color, bar.Width = colorOf(s), vg.Points(1)
			p.Add(bar)
			lo, hi = min(lo, q.x/1e3), max(hi, q.y/1e3)
		}
	}
	p.Y.Min, p.Y.Max = lo/2, hi*8
	placeLegend(p)
	return p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(out, name))
}

// ratioChart draws every ratio of t with its 95% interval, a row per
// operation and a mark per peer, on a log scale centred on 1. A ratio
// beyond the axis is drawn at its edge as a triangle, with its value.
func ratioChart(t *table, title, out, name string) error {
	const lim = 8.0 // the axis spans [1/lim, lim]
	var rows []row
	for _, r := range t.rows {
		if len(r.ratios) > 0 {
			rows = append(rows, r)
		}
	}
	peers := t.systems[1:]
	p := plot.New()
	p.Title.Text = title + ": tipkv / peer with its 95% interval; below 1 tipkv takes less"
	p.Title.Padding = vg.Points(8)
	p.X.Scale = plot.LogScale{}
	p.X.Min, p.X.Max = 1/lim, lim
	p.X.Tick.Marker = ratioTicks{}
	p.X.Label.Text = "tipkv / peer (log scale)"
	p.Add(plotter.NewGrid())
	top := max(1, (len(peers)+1)/2) // empty rows on top, for the legend: one per two peers
	labels := make([]string, len(rows)+top)
	clamp := func(v float64) float64 { return min(max(v, 1/lim), lim) }
	for i, r := range rows {
		y := float64(len(rows) - 1 - i) // the first row on top
		labels[len(rows)-1-i] = r.label()
		for j, s := range peers {
			e, ok := r.ratios[s]
			if !ok {
				continue
			}
			yy := y + min(0.3, 0.8/float64(len(peers)))*(float64(j)-float64(len(peers)-1)/2) // peers side by side within the row
			if !math.IsNaN(e.lo) {
				l, err := plotter.NewLine(plotter.XYs{{X: clamp(e.lo), Y: yy}, {X: clamp(e.hi), Y: yy}})
				if err != nil {
					return err
				}
				l.Color, l.Width = colorOf(s), vg.Points(2)
				p.Add(l)
			}
			pt, err := plotter.NewScatter(plotter.XYs{{X: clamp(e.ratio), Y: yy}})
			if err != nil {
				return err
			}
			pt.Color = colorOf(s)
			pt.Shape, pt.Radius = draw.CircleGlyph{}, vg.Points(3)
			if e.ratio != clamp(e.ratio) {
				pt.Shape, pt.Radius = draw.TriangleGlyph{}, vg.Points(4)
				lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: clamp(e.ratio), Y: yy}}, Labels: []string{e.String()}})
				if err != nil {
					return err
				}
				for k := range lbl.TextStyle {
					lbl.TextStyle[k].Font.Size = vg.Points(7)
					lbl.TextStyle[k].XAlign = draw.XRight
					lbl.TextStyle[k].YAlign = draw.YCenter
					if e.ratio < 1 {
						lbl.TextStyle[k].XAlign = draw.XLeft
					}
				}
				lbl.Offset.X = vg.Points(6)
				if e.ratio > 1 {
					lbl.Offset.X = -vg.Points(6)
				}
				p.Add(lbl)
			}
			p.Add(pt)
			if i == 0 {
				p.Legend.Add("tipkv / "+s, pt)
			}
		}
	}
	one, err := plotter.NewLine(plotter.XYs{{X: 1, Y: -0.5}, {X: 1, Y: float64(len(rows)+top-1) + 0.5}})
	if err != nil {
		return err
	}
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(one)
	p.NominalY(labels...)
	p.Y.Tick.Label.Font.Size = vg.Points(9)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(10)
	return p.Save(10*vg.Inch, vg.Length(len(rows)+top)*0.32*vg.Inch+1.2*vg.Inch, filepath.Join(out, name))
}

// ratioTicks mark the powers of two: 1/8, 1/4, 1/2, 1, 2, 4, 8.
type ratioTicks struct{}

func (ratioTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Ceil(math.Log2(lo) - 1e-9); e <= math.Floor(math.Log2(hi)+1e-9); e++ {
		v := math.Pow(2, e)
		lbl := fmt.Sprintf("%g", v)
		if v < 1 {
			lbl = fmt.Sprintf("1/%g", 1/v)
		}
		ts = append(ts, plot.Tick{Value: v, Label: lbl})
	}
	return ts
}

// latencyChart draws, per system, the share of the riverpg section's
// jobs that a worker held within a time of the insert call: one line per
// system, the time on a log scale.
func latencyChart(r *riverPGResult, out, name string) error {
	p := plot.New()
	p.Title.Text = "Insert commit to a worker holding the job, PostgreSQL: share of jobs within a time (left is better)"
	p.X.Label.Text = "ms from the insert call (log scale)"
	p.Y.Label.Text = "share of jobs"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = logTicks{}
	p.Y.Min, p.Y.Max = 0, 1.25
	lo, hi := math.Inf(1), 0.0
	for _, s := range r.table.systems {
		ds := slices.Clone(r.latency[s])
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		xys := make(plotter.XYs, len(ds))
		for i, d := range ds {
			xys[i] = plotter.XY{X: d / 1e6, Y: float64(i+1) / float64(len(ds))}
		}
		lo, hi = min(lo, xys[0].X), max(hi, xys[len(xys)-1].X)
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color, l.Width = colorOf(s), vg.Points(2)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (p50 %s ms, p99 %s ms)", s, short(percentile(ds, 0.5)/1e6), short(percentile(ds, 0.99)/1e6)), l)
	}
	if hi == 0 {
		return nil // nothing measured
	}
	p.X.Min, p.X.Max = lo/1.5, hi*1.5
	placeLegend(p)
	return p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(out, name))
}

// placeLegend puts the legend in the top left corner of the data area,
// below the title, and leaves headroom above the data for it.
func placeLegend(p *plot.Plot) {
	p.Title.Padding = vg.Points(10)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(60), -vg.Points(30)
	p.Legend.Padding = vg.Points(2)
	p.Add(plotter.NewGrid())
}

// churnChart draws each system's disk use over the churn cycles.
func churnChart(r *queuesResult, out, name string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Disk use over %s enqueue/dequeue cycles", thousands(r.cycles))
	p.X.Label.Text = "enqueue/dequeue cycles"
	p.Y.Label.Text = "MiB on disk"
	p.X.Tick.Marker, p.Y.Tick.Marker = shortTicks{}, shortTicks{}
	p.Y.Min = 0
	for _, s := range r.systems {
		var xys plotter.XYs
		for _, pt := range r.churn[s] {
			xys = append(xys, plotter.XY{X: pt.x, Y: pt.y / (1 << 20)})
		}
		if err := addLine(p, s, xys); err != nil {
			return err
		}
	}
	top := 0.0
	for _, s := range r.systems {
		for _, pt := range r.churn[s] {
			top = max(top, pt.y/(1<<20))
		}
	}
	p.Y.Max = top * 1.3
	placeLegend(p)
	return p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(out, name))
}

func addLine(p *plot.Plot, system string, xys plotter.XYs) error {
	l, pts, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	l.Color, pts.Color = colorOf(system), colorOf(system)
	l.Width = vg.Points(2)
	if system == sysNaive || system == sysPebble {
		l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	}
	pts.Shape = draw.CircleGlyph{}
	p.Add(l, pts)
	p.Legend.Add(system, l, pts)
	return nil
}

// shortTicks are gonum's default ticks with compact labels.
type shortTicks struct{}

func (shortTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = short(ts[i].Value)
		}
	}
	return ts
}

// logTicks marks each power of ten, labelled plainly (1, 10, 100, 1k).
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		v := math.Pow(10, e)
		ts = append(ts, plot.Tick{Value: v, Label: short(v)})
		for m := 2.0; m < 10; m++ {
			ts = append(ts, plot.Tick{Value: m * v})
		}
	}
	return ts
}

// short prints a number compactly: 0.85, 3.20, 41.0, 1.2k, 1M.
func short(v float64) string {
	switch {
	case v >= 1e6:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", v/1e6), ".0") + "M"
	case v >= 1e3:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", v/1e3), ".0") + "k"
	case v >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}
