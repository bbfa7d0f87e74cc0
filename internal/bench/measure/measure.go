// Package measure times closed-loop workloads and summarises repeated
// runs: it drives workers that each wait for one operation before starting
// the next, counts the operations that complete inside a measurement
// window after a warm-up, and reports throughput and latency percentiles.
// Runs of one configuration are summarised as a median with its minimum
// and maximum. Nothing here asserts anything about the figures.
package measure

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"time"
)

// Run is one timed window of a workload.
type Run struct {
	// Ops is the number of operations that completed inside the window.
	Ops int `json:"ops"`
	// Seconds is the length of the window.
	Seconds float64 `json:"seconds"`
	// OpsPerSec is Ops over Seconds.
	OpsPerSec float64 `json:"ops_per_sec"`
	// P50 and P99 are latency percentiles of those operations, in
	// milliseconds.
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	// Errors counts operations that failed inside the window.
	Errors int `json:"errors,omitempty"`
}

// Worker is one closed-loop client of Drive. Its operation reports each
// completed operation with Record.
type Worker struct {
	// ID numbers the workers from 0.
	ID int

	start, end time.Time
	lat        []time.Duration
	errs       int
}

// Record reports one operation that ran from t0 to t1; it counts when t1
// falls inside the measurement window.
func (w *Worker) Record(t0, t1 time.Time) {
	if t1.Before(w.start) || !t1.Before(w.end) {
		return
	}
	w.lat = append(w.lat, t1.Sub(t0))
}

// Failed reports an operation that failed at time t; it counts when t
// falls inside the measurement window.
func (w *Worker) Failed(t time.Time) {
	if !t.Before(w.start) && t.Before(w.end) {
		w.errs++
	}
}

// Drive runs workers concurrent closed loops of op for warmup plus window,
// and measures the window. A worker starts no operation after the window
// ends, but finishes the one in flight, so a multi-step operation (lease a
// task, then report it finished) is never left half done. An error ends
// that worker and is returned once all have stopped.
func Drive(ctx context.Context, workers int, warmup, window time.Duration, op func(ctx context.Context, w *Worker) error) (Run, error) {
	start := time.Now().Add(warmup)
	end := start.Add(window)
	ws := make([]*Worker, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range ws {
		ws[i] = &Worker{ID: i, start: start, end: end}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(end) {
				if err := op(ctx, ws[i]); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Run{}, err
	}
	if err := errors.Join(errs...); err != nil {
		return Run{}, err
	}
	var lat []time.Duration
	errCount := 0
	for _, w := range ws {
		lat = append(lat, w.lat...)
		errCount += w.errs
	}
	return Summarize(lat, window, errCount), nil
}

// Summarize makes a Run of the latencies of the operations that completed
// in a window of the given length.
func Summarize(lat []time.Duration, window time.Duration, errs int) Run {
	r := Run{Ops: len(lat), Seconds: window.Seconds(), Errors: errs}
	if window > 0 {
		r.OpsPerSec = float64(len(lat)) / window.Seconds()
	}
	slices.Sort(lat)
	r.P50 = Millis(Percentile(lat, 0.50))
	r.P99 = Millis(Percentile(lat, 0.99))
	return r
}

// Percentile returns the nearest-rank q-quantile (0 < q <= 1) of sorted
// durations, or 0 for none.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Millis converts d to milliseconds.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Summary is the median of repeated measurements with their range.
type Summary struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// N is the number of measurements.
	N int `json:"n"`
}

// Of summarises values; the median of an even count is the mean of the
// middle two.
func Of(values []float64) Summary {
	if len(values) == 0 {
		return Summary{}
	}
	s := slices.Clone(values)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Summary{Median: med, Min: s[0], Max: s[n-1], N: n}
}

// Runs summarises one field of runs.
func Runs(runs []Run, field func(Run) float64) Summary {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = field(r)
	}
	return Of(v)
}

// Distribution is a set of samples described by percentiles, for figures
// such as fail-over times where every sample is one event.
type Distribution struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// Distribute describes samples with nearest-rank percentiles.
func Distribute(samples []float64) Distribution {
	if len(samples) == 0 {
		return Distribution{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return Distribution{N: len(s), P50: at(0.5), P95: at(0.95), P99: at(0.99), Min: s[0], Max: s[len(s)-1]}
}
