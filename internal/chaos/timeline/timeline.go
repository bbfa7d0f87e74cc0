// Package timeline draws a fault-injection run as a picture: the rate of
// operations that got a definite answer, over time, with every injected
// fault shaded where it was active. Dips in the line under a shaded span
// are the unavailability that the run's report measures.
package timeline

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"time"

	"github.com/raftmaster/raftmaster/internal/chaos/history"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Span is a fault, active from Start to End (nanoseconds since the run
// started).
type Span struct {
	Label      string
	Start, End int64
}

// Bucket is the width of one rate sample.
const Bucket = 250 * time.Millisecond

// Rates returns, per Bucket from the start of the run, the operations that
// returned a definite answer in it, per second. Operations with an unknown
// outcome count nowhere, nor do the clients' own session traffic and the
// harness's stalls (history.Kind.Background).
func Rates(ops []history.Op) []float64 {
	ops = slices.DeleteFunc(slices.Clone(ops), func(op history.Op) bool { return op.Kind.Background() })
	var last int64
	for _, op := range ops {
		if !op.Unknown() && op.Return > last {
			last = op.Return
		}
	}
	if len(ops) == 0 {
		return nil
	}
	rates := make([]float64, last/int64(Bucket)+1)
	for _, op := range ops {
		if !op.Unknown() && op.Return >= 0 {
			rates[op.Return/int64(Bucket)]++
		}
	}
	for i := range rates {
		rates[i] /= Bucket.Seconds()
	}
	return rates
}

// Save draws the run and writes it to path; the format follows the
// extension (.png, .svg or .pdf).
func Save(path, title string, ops []history.Op, faults []Span) error {
	rates := Rates(ops)
	if len(rates) == 0 {
		return fmt.Errorf("timeline: no operations to draw")
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds since the start of the run"
	p.Y.Label.Text = "answered operations per second"
	top := slices.Max(rates) * 1.15
	if top == 0 {
		top = 1
	}
	p.Y.Min, p.Y.Max = 0, top
	p.X.Min, p.X.Max = 0, float64(len(rates))*Bucket.Seconds()

	labels := plotter.XYLabels{}
	for i, f := range faults {
		x0, x1 := seconds(f.Start), seconds(max(f.End, f.Start))
		band, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: 0}, {X: x1, Y: 0}, {X: x1, Y: top}, {X: x0, Y: top}})
		if err != nil {
			return err
		}
		band.Color = faultColor(i)
		band.LineStyle.Width = 0
		p.Add(band)
		// Stagger the labels so that neighbouring faults stay readable.
		labels.XYs = append(labels.XYs, plotter.XY{X: x0, Y: top * (0.96 - 0.07*float64(i%4))})
		labels.Labels = append(labels.Labels, f.Label)
	}
	line := make(plotter.XYs, len(rates))
	for i, r := range rates {
		line[i] = plotter.XY{X: (float64(i) + 0.5) * Bucket.Seconds(), Y: r}
	}
	l, err := plotter.NewLine(line)
	if err != nil {
		return err
	}
	l.Color = color.RGBA{R: 20, G: 60, B: 160, A: 255}
	l.Width = vg.Points(1)
	p.Add(l)
	if len(labels.Labels) > 0 {
		lb, err := plotter.NewLabels(labels)
		if err != nil {
			return err
		}
		for i := range lb.TextStyle {
			lb.TextStyle[i].Font.Size = vg.Points(7)
			lb.TextStyle[i].XAlign = draw.XLeft
		}
		p.Add(lb)
	}
	width := vg.Length(math.Max(8, math.Min(40, float64(len(rates))*Bucket.Seconds()/4))) * vg.Inch
	return p.Save(width, 4*vg.Inch, path)
}

func seconds(ns int64) float64 { return time.Duration(ns).Seconds() }

// faultColor alternates two translucent shades, so adjacent faults differ.
func faultColor(i int) color.Color {
	if i%2 == 0 {
		return color.NRGBA{R: 230, G: 80, B: 60, A: 50}
	}
	return color.NRGBA{R: 240, G: 170, B: 40, A: 60}
}
