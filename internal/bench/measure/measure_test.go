package measure

import (
	"context"
	"testing"
	"time"
)

func TestPercentileAndSummary(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if got := Percentile(d, 0.5); got != 50*time.Millisecond {
		t.Errorf("p50 = %v", got)
	}
	if got := Percentile(d, 0.99); got != 99*time.Millisecond {
		t.Errorf("p99 = %v", got)
	}
	if got := Of([]float64{3, 1, 2, 10}); got != (Summary{Median: 2.5, Min: 1, Max: 10, N: 4}) {
		t.Errorf("summary %+v", got)
	}
	if got := Distribute([]float64{5, 1, 3}); got.P50 != 3 || got.P95 != 5 || got.P99 != 5 || got.Min != 1 || got.N != 3 {
		t.Errorf("distribution %+v", got)
	}
	var twenty []float64
	for i := 20; i >= 1; i-- {
		twenty = append(twenty, float64(i))
	}
	if got := Distribute(twenty); got.P50 != 10 || got.P95 != 19 || got.Max != 20 {
		t.Errorf("distribution of 1..20: %+v", got)
	}
}

// TestDriveCountsTheWindow: operations completed during the warm-up do
// not count, and a worker finishes the operation in flight.
func TestDriveCountsTheWindow(t *testing.T) {
	run, err := Drive(context.Background(), 2, 50*time.Millisecond, 100*time.Millisecond, func(ctx context.Context, w *Worker) error {
		t0 := time.Now()
		time.Sleep(5 * time.Millisecond)
		w.Record(t0, time.Now())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if run.Ops == 0 || run.Ops > 2*100/5+2 || run.Seconds != 0.1 {
		t.Errorf("run %+v", run)
	}
}
