package bench

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// drawCharts draws the PNG charts of the parts that ran into dir and
// returns their file names.
func drawCharts(dir string, r *Results) ([]string, error) {
	var names []string
	save := func(name string, p *plot.Plot, w, h vg.Length) (err error) {
		defer func() {
			// gonum panics on data it cannot scale; a chart is not worth the run.
			if r := recover(); r != nil {
				err = fmt.Errorf("%s: %v", name, r)
			}
		}()
		widenLog(&p.X)
		widenLog(&p.Y)
		if err := p.Save(w, h, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		names = append(names, name)
		return nil
	}
	if d := r.Dispatch; d != nil {
		if p, ok, err := dispatchChart(d); err != nil {
			return names, err
		} else if ok {
			if err := save("dispatch.png", p, 7*vg.Inch, 4.5*vg.Inch); err != nil {
				return names, err
			}
		}
	}
	if g := r.Growth; g != nil {
		if p, ok, err := growthChart(g); err != nil {
			return names, err
		} else if ok {
			if err := save("growth.png", p, 7*vg.Inch, 4.5*vg.Inch); err != nil {
				return names, err
			}
		}
	}
	if f := r.Failover; f != nil {
		if p, ok, err := failoverChart(f); err != nil {
			return names, err
		} else if ok {
			if err := save("failover.png", p, 7*vg.Inch, 4.5*vg.Inch); err != nil {
				return names, err
			}
		}
		if p, ok, err := phasesChart(f.Raft); err != nil {
			return names, err
		} else if ok {
			if err := save("failover-raft-phases.png", p, 8*vg.Inch, 4.5*vg.Inch); err != nil {
				return names, err
			}
		}
	}
	if a := r.Allgather; a != nil {
		if p, ok, err := allgatherChart(a); err != nil {
			return names, err
		} else if ok {
			if err := save("allgather.png", p, 6*vg.Inch, 4*vg.Inch); err != nil {
				return names, err
			}
		}
	}
	return names, nil
}

// rangePoints are medians with their min–max as error bars.
type rangePoints struct {
	plotter.XYs
	plotter.YErrors
}

// addSeries draws one system's medians as a line with points and its
// min–max as error bars.
func addSeries(p *plot.Plot, i int, name string, xs []float64, sums []Series) (bool, error) {
	var pts rangePoints
	for k, s := range sums {
		if !s.ok() || s.OpsPerSec.Median <= 0 {
			continue
		}
		pts.XYs = append(pts.XYs, plotter.XY{X: xs[k], Y: s.OpsPerSec.Median})
		pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{
			Low: s.OpsPerSec.Median - s.OpsPerSec.Min, High: s.OpsPerSec.Max - s.OpsPerSec.Median})
	}
	if len(pts.XYs) == 0 {
		return false, nil
	}
	l, sc, err := plotter.NewLinePoints(pts.XYs)
	if err != nil {
		return false, err
	}
	l.Color, sc.Color = plotutil.Color(i), plotutil.Color(i)
	sc.Shape = plotutil.Shape(i)
	eb, err := plotter.NewYErrorBars(pts)
	if err != nil {
		return false, err
	}
	eb.Color = plotutil.Color(i)
	p.Add(l, sc, eb)
	p.Legend.Add(name, l, sc)
	return true, nil
}

func dispatchChart(d *DispatchResults) (*plot.Plot, bool, error) {
	p := plot.New()
	p.Title.Text = "Throughput against concurrency (3 nodes, fsync on; median, bars min–max)"
	p.X.Label.Text = "concurrent clients"
	p.Y.Label.Text = "writes per second (log scale)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	var xs []float64
	var ticks []plot.Tick
	rm, etcd, raw, one := []Series{}, []Series{}, []Series{}, []Series{}
	for _, row := range d.Rows {
		xs = append(xs, float64(row.Concurrency))
		ticks = append(ticks, plot.Tick{Value: float64(row.Concurrency), Label: fmt.Sprint(row.Concurrency)})
		rm, etcd, raw, one = append(rm, row.Raftmaster), append(etcd, row.EtcdPut), append(raw, row.RawRaft), append(one, row.OneWrite)
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	drawn := false
	for i, s := range []struct {
		name string
		v    []Series
	}{{"raftmaster (GetTask, TaskFinished)", rm}, {"etcd Put", etcd}, {"raw hashicorp/raft Apply", raw},
		{"raftmaster, one write per task (GetTaskAfter)", one}} {
		ok, err := addSeries(p, i, s.name, xs, s.v)
		if err != nil {
			return nil, false, err
		}
		drawn = drawn || ok
	}
	p.Legend.Top, p.Legend.Left = true, true
	headroom(p, 4)
	return p, drawn, nil
}

func growthChart(g *GrowthResults) (*plot.Plot, bool, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Dispatch throughput against dataset size (%d trainers; median, bars min–max)", g.Concurrency)
	p.X.Label.Text = "tasks in the dataset"
	p.Y.Label.Text = "writes per second (log scale)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	var xs []float64
	var raft, etcd []Series
	var ticks []plot.Tick
	for _, row := range g.Rows {
		ticks = append(ticks, plot.Tick{Value: float64(row.Tasks), Label: count(row.Tasks)})
		xs = append(xs, float64(row.Tasks))
		raft, etcd = append(raft, row.Raft.Series), append(etcd, row.Etcd.Series)
	}
	ok1, err := addSeries(p, 0, "raftmaster, Raft backend", xs, raft)
	if err != nil {
		return nil, false, err
	}
	ok2, err := addSeries(p, 3, "raftmaster, etcd backend", xs, etcd)
	if err != nil {
		return nil, false, err
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Legend.Left = true
	if p.Y.Min > 0 {
		p.Y.Min /= 3 // room for the legend below the lines
	}
	return p, ok1 || ok2, nil
}

// failoverChart draws every kill's time to the next write, per backend.
func failoverChart(f *FailoverResults) (*plot.Plot, bool, error) {
	p := plot.New()
	p.Title.Text = "Leader SIGKILL → next acknowledged write, every kill"
	p.X.Label.Text = "kill"
	p.Y.Label.Text = "seconds"
	p.Y.Min = 0
	drawn := false
	for i, fb := range []struct {
		name string
		b    *FailoverBackend
	}{{"Raft backend", f.Raft}, {"etcd backend", f.Etcd}} {
		if fb.b == nil {
			continue
		}
		var pts plotter.XYs
		for k, kill := range fb.b.Kills {
			if kill.Error == "" {
				pts = append(pts, plotter.XY{X: float64(k + 1), Y: kill.TotalMs / 1000})
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, false, err
		}
		c := plotutil.Color(i * 3)
		l.Color, sc.Color, sc.Shape = c, c, plotutil.Shape(i)
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l, sc)
		p.Legend.Add(fmt.Sprintf("%s (median %.2f s)", fb.name, fb.b.Total.P50/1000), l, sc)
		drawn = true
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	p.Y.Max *= 1.3
	var ticks []plot.Tick
	for k := 1; k <= max(len(f.Raft.killsOrNil()), len(f.Etcd.killsOrNil())); k++ {
		label := ""
		if k == 1 || k%5 == 0 {
			label = strconv.Itoa(k)
		}
		ticks = append(ticks, plot.Tick{Value: float64(k), Label: label})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	return p, drawn, nil
}

// phasesChart stacks the phases of every Raft-backend kill.
func phasesChart(b *FailoverBackend) (*plot.Plot, bool, error) {
	if b == nil || len(b.Kills) == 0 {
		return nil, false, nil
	}
	p := plot.New()
	p.Title.Text = "Raft backend fail-over, phase by phase (from 10 ms status polls of the survivors)"
	p.X.Label.Text = "kill"
	p.Y.Label.Text = "milliseconds"
	var elect, take, redisc plotter.Values
	var names []string
	for i, k := range b.Kills {
		names = append(names, fmt.Sprint(i+1))
		elect = append(elect, k.NewLeaderMs)
		take = append(take, k.TakeOverMs)
		redisc = append(redisc, k.RediscoveryMs)
	}
	w := vg.Points(14)
	var prev *plotter.BarChart
	for _, s := range []struct {
		name string
		v    plotter.Values
		c    color.Color
	}{
		{"kill → a survivor names a new leader", elect, color.RGBA{R: 200, G: 70, B: 60, A: 255}},
		{"→ the new leader is ready", take, color.RGBA{R: 240, G: 170, B: 40, A: 255}},
		{"→ next acknowledged write", redisc, color.RGBA{R: 60, G: 110, B: 190, A: 255}},
	} {
		bc, err := plotter.NewBarChart(s.v, w)
		if err != nil {
			return nil, false, err
		}
		bc.Color = s.c
		bc.LineStyle.Width = 0
		if prev != nil {
			bc.StackOn(prev)
		}
		prev = bc
		p.Add(bc)
		p.Legend.Add(s.name, bc)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.7, float64(len(names))-0.3
	p.Y.Min = 0
	p.Y.Max *= 1.3
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Legend.YPosition = draw.PosTop
	return p, true, nil
}

func allgatherChart(a *AllgatherResults) (*plot.Plot, bool, error) {
	p := plot.New()
	p.Title.Text = "Allgather: last join acknowledged → last member's result"
	p.X.Label.Text = "peers in the group"
	p.Y.Label.Text = "milliseconds (log scale)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	var pts rangePoints
	var ticks []plot.Tick
	for _, row := range a.Rows {
		if row.Completion.N == 0 || row.Completion.Median <= 0 {
			continue
		}
		pts.XYs = append(pts.XYs, plotter.XY{X: float64(row.Peers), Y: row.Completion.Median})
		pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{
			Low: row.Completion.Median - row.Completion.Min, High: row.Completion.Max - row.Completion.Median})
		ticks = append(ticks, plot.Tick{Value: float64(row.Peers), Label: fmt.Sprint(row.Peers)})
	}
	if len(pts.XYs) == 0 {
		return nil, false, nil
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	l, sc, err := plotter.NewLinePoints(pts.XYs)
	if err != nil {
		return nil, false, err
	}
	eb, err := plotter.NewYErrorBars(pts)
	if err != nil {
		return nil, false, err
	}
	p.Add(l, sc, eb)
	return p, true, nil
}

func (b *FailoverBackend) killsOrNil() []Kill {
	if b == nil {
		return nil
	}
	return b.Kills
}

// widenLog gives a log-scale axis with a single value a range around it.
func widenLog(a *plot.Axis) {
	if _, ok := a.Scale.(plot.LogScale); ok && a.Min == a.Max && a.Max > 0 {
		a.Min, a.Max = a.Min/2, a.Max*2
	}
}

// headroom raises the top of a log-scale Y axis by factor, so that the
// legend does not cover the data.
func headroom(p *plot.Plot, factor float64) {
	if p.Y.Max > 0 {
		p.Y.Max *= factor
	}
	if p.Y.Min > 0 {
		p.Y.Min /= 1.5
	}
}

// logTicks marks a log axis at 1, 2 and 5 of every decade, with unlabelled
// minor ticks between.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			label := ""
			if m == 1 || m == 2 || m == 5 {
				label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: label})
		}
	}
	return ticks
}
