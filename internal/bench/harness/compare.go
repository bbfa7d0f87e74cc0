package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/internal/bench/measure"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Options sizes a Compare.
type Options struct {
	// Bin is the raftmaster binary the servers run.
	Bin string
	// Dir is where the dataset, the servers' data and their logs go.
	Dir string
	// Nodes is the size of the Raft cluster.
	Nodes int
	// Clients is the number of concurrent trainers.
	Clients int
	// Tasks is the number of tasks of a pass.
	Tasks int
	// Passes is the number of passes.
	Passes int
	// EtcdEndpoints, when set, is an etcd on which one master of the etcd
	// backend runs the same workload after the Raft cluster, under a fresh
	// key prefix that is deleted afterwards.
	EtcdEndpoints []string
	// Progress, when not nil, is told every second how many tasks the
	// backend being measured has finished.
	Progress io.Writer
}

// Check reports options out of bounds.
func (o Options) Check() error {
	if o.Nodes < 1 || o.Nodes > 9 || o.Clients < 1 || o.Clients > 1000 || o.Tasks < 1 || o.Tasks > 1_000_000 || o.Passes < 1 || o.Passes > 100 {
		return errors.New("want 1 to 9 nodes, 1 to 1000 clients, 1 to 1000000 tasks and 1 to 100 passes")
	}
	return nil
}

// Result is one backend's figures of a Compare. Its JSON form is what
// raftmaster bench --json prints, one object per backend.
type Result struct {
	Backend   string  `json:"backend"`
	Nodes     int     `json:"nodes"`
	Clients   int     `json:"clients"`
	Tasks     int     `json:"tasks_per_pass"`
	Passes    int     `json:"passes"`
	Ops       int     `json:"ops"`
	Seconds   float64 `json:"seconds"`
	OpsPerSec float64 `json:"ops_per_sec"`
	// Ratio is OpsPerSec over the first backend's.
	Ratio     float64 `json:"ratio"`
	GetP50    string  `json:"get_task_p50"`
	GetP99    string  `json:"get_task_p99"`
	FinishP50 string  `json:"task_finished_p50"`
	FinishP99 string  `json:"task_finished_p99"`
}

// Compare runs one workload on each backend in turn, on servers it starts
// from o.Bin on 127.0.0.1: a Raft cluster of o.Nodes, then, with
// o.EtcdEndpoints, one master of the etcd backend. The workload is
// o.Clients trainers running o.Passes passes of GetTask and TaskFinished
// over a dataset of o.Tasks one-chunk tasks, as fast as they can; every
// task of every pass is leased and finished once.
func Compare(ctx context.Context, o Options) ([]Result, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	dataset := filepath.Join(o.Dir, "bench.recordio")
	if err := WriteDataset(dataset, o.Tasks); err != nil {
		return nil, err
	}
	var results []Result
	raft, err := StartRaft(ctx, o.Bin, filepath.Join(o.Dir, "raft"), o.Nodes)
	if err != nil {
		return nil, err
	}
	r, err := o.runPasses(ctx, raft, dataset)
	raft.Stop()
	if err != nil {
		return nil, fmt.Errorf("raft backend: %w\n%s", err, raft.LogTail())
	}
	results = append(results, r)

	if len(o.EtcdEndpoints) > 0 {
		prefix := "/raftmaster-bench-" + uuid.NewString()
		defer deletePrefix(o.EtcdEndpoints, prefix)
		master, err := StartEtcdBackend(ctx, o.Bin, filepath.Join(o.Dir, "etcd"), o.EtcdEndpoints, prefix, 1, 0)
		if err != nil {
			return nil, err
		}
		r, err := o.runPasses(ctx, master, dataset)
		master.Stop()
		if err != nil {
			return nil, fmt.Errorf("etcd backend: %w\n%s", err, master.LogTail())
		}
		results = append(results, r)
	}
	for i := range results {
		results[i].Ratio = results[i].OpsPerSec / results[0].OpsPerSec
	}
	return results, nil
}

// runPasses sets the dataset on c and runs the trainers until every pass
// is over.
func (o Options) runPasses(ctx context.Context, c *Cluster, dataset string) (Result, error) {
	res := Result{Backend: c.Backend, Nodes: len(c.Procs), Clients: o.Clients, Tasks: o.Tasks, Passes: o.Passes}
	if _, err := c.SetDataset(dataset, 10*time.Minute, time.Minute); err != nil {
		return res, fmt.Errorf("set dataset: %w", err)
	}
	var finished atomic.Int64
	if o.Progress != nil {
		done := make(chan struct{})
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			o.report(c.Backend, &finished, done)
		}()
		defer func() { close(done); <-stopped }()
	}

	d := &Dispatch{Passes: o.Passes}
	lat := make([][2][]time.Duration, o.Clients) // per trainer, per Op
	errs := make([]error, o.Clients)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := c.NewClient()
			if err != nil {
				errs[i] = err
				return
			}
			defer cl.Close()
			record := func(op Op, t0, t1 time.Time) {
				lat[i][op] = append(lat[i][op], t1.Sub(t0))
				if op == TaskFinished {
					finished.Add(1)
				}
			}
			for {
				if err := d.Pair(ctx, cl, record, nil); err != nil {
					if !errors.Is(err, ErrPassesDone) {
						errs[i] = err
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	var get, fin []time.Duration
	for _, l := range lat {
		get, fin = append(get, l[GetTask]...), append(fin, l[TaskFinished]...)
	}
	res.Ops = len(get) + len(fin)
	res.Seconds = elapsed.Seconds()
	res.OpsPerSec = float64(res.Ops) / elapsed.Seconds()
	res.GetP50, res.GetP99 = percentile(get, 0.50), percentile(get, 0.99)
	res.FinishP50, res.FinishP99 = percentile(fin, 0.50), percentile(fin, 0.99)
	return res, nil
}

// report prints the progress every second, and once more when done.
func (o Options) report(backend string, finished *atomic.Int64, done <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	total := o.Tasks * o.Passes
	for {
		select {
		case <-done:
			fmt.Fprintf(o.Progress, "%s: %d/%d tasks finished\n", backend, finished.Load(), total)
			return
		case <-tick.C:
			fmt.Fprintf(o.Progress, "%s: %d/%d tasks finished\n", backend, finished.Load(), total)
		}
	}
}

// percentile is the nearest-rank q-quantile of d to 10 µs, or "-" for none.
func percentile(d []time.Duration, q float64) string {
	if len(d) == 0 {
		return "-"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return measure.Percentile(s, q).Round(10 * time.Microsecond).String()
}

// deletePrefix deletes every key under prefix in the etcd at endpoints,
// as far as it can.
func deletePrefix(endpoints []string, prefix string) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = cli.Delete(ctx, prefix+"/", clientv3.WithPrefix())
}

// WriteTable prints results as a table, one row per backend.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tNODES\tCLIENTS\tTASKS/PASS\tPASSES\tOPS\tSECONDS\tOPS/S\tVS FIRST\tGETTASK P50\tP99\tFINISHED P50\tP99")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.0f\t%.2fx\t%s\t%s\t%s\t%s\n", r.Backend, r.Nodes, r.Clients, r.Tasks, r.Passes,
			r.Ops, r.Seconds, r.OpsPerSec, r.Ratio, r.GetP50, r.GetP99, r.FinishP50, r.FinishP99)
	}
	return tw.Flush()
}

// WriteJSON prints results as an indented JSON array.
func WriteJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}
