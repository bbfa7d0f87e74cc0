package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/bench/etcdmember"
	"github.com/raftmaster/raftmaster/internal/bench/harness"
	"github.com/raftmaster/raftmaster/internal/bench/measure"
	"github.com/raftmaster/raftmaster/internal/bench/rawraft"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// DispatchResults compares task dispatch with etcd Put and raw Raft Apply.
type DispatchResults struct {
	// Tasks is the size of the raftmaster dataset.
	Tasks int `json:"tasks"`
	// EntryBytes is the size of a GetTask log entry, the size of the raw
	// Raft entries and of the etcd values.
	EntryBytes int `json:"entry_bytes"`
	// Batch is how many tasks a write of the Batch series leases.
	Batch int           `json:"batch,omitempty"`
	Rows  []DispatchRow `json:"rows"`
}

// DispatchRow is one concurrency.
type DispatchRow struct {
	Concurrency int `json:"concurrency"`
	// Raftmaster counts GetTask and TaskFinished as one write each (a pair
	// is two writes, two Raft entries).
	Raftmaster Series `json:"raftmaster"`
	EtcdPut    Series `json:"etcd_put"`
	RawRaft    Series `json:"raw_raft"`
	// VsEtcd and VsRawRaft are raftmaster's median writes per second over
	// the other's median operations per second.
	VsEtcd    float64 `json:"raftmaster_vs_etcd"`
	VsRawRaft float64 `json:"raftmaster_vs_raw_raft"`
	// RaftmasterTasks is the Raftmaster series in tasks per second: half
	// its writes per second, a GetTask and TaskFinished pair being one
	// task.
	RaftmasterTasks measure.Summary `json:"raftmaster_tasks_per_sec"`
	// OneWrite is raftmaster read with one write per task: each trainer
	// carries the task it holds into its next GetTaskAfter, which finishes
	// it and leases the next in one Raft entry. An operation is a task
	// finished (its OpsPerSec are tasks per second); the GetTask that
	// starts each pass finishes none and does not count.
	OneWrite Series `json:"raftmaster_one_write"`
	// OneWriteVsPair is OneWrite's median tasks per second over
	// RaftmasterTasks' median.
	OneWriteVsPair float64 `json:"one_write_vs_pair"`
	// Batch is raftmaster read by prefetching trainers: each write
	// (GetTasks) finishes the batch a trainer holds and leases the next
	// DispatchResults.Batch tasks in one Raft entry. An operation is a
	// task finished; p50 and p99 are those of the writes.
	Batch Series `json:"raftmaster_batch"`
	// BatchVsPair is Batch's median tasks per second over
	// RaftmasterTasks' median.
	BatchVsPair float64 `json:"batch_vs_pair"`
}

// Series is repeated throughput runs of one system and configuration.
type Series struct {
	Runs      []measure.Run   `json:"runs,omitempty"`
	OpsPerSec measure.Summary `json:"ops_per_sec"`
	P50       measure.Summary `json:"p50_ms"`
	P99       measure.Summary `json:"p99_ms"`
	// Error says why the series is missing or incomplete.
	Error string `json:"error,omitempty"`
}

func (s *Series) add(r measure.Run) {
	s.Runs = append(s.Runs, r)
	s.OpsPerSec = measure.Runs(s.Runs, func(r measure.Run) float64 { return r.OpsPerSec })
	s.P50 = measure.Runs(s.Runs, func(r measure.Run) float64 { return r.P50 })
	s.P99 = measure.Runs(s.Runs, func(r measure.Run) float64 { return r.P99 })
}

func (s *Series) fail(err error) {
	if s.Error == "" {
		s.Error = firstLine(err.Error())
	}
}

// ok reports whether the series has figures and no error.
func (s *Series) ok() bool { return s.Error == "" && len(s.Runs) > 0 }

// getTaskEntryBytes is the size of the log entry of a GetTask with a
// request id, as a leader proposes it.
func getTaskEntryBytes() int {
	return len(fsm.Encode(&fsm.GetTask{Header: fsm.Header{Now: time.Now().UnixNano(),
		Request: fsm.RequestID{Client: uuid.New(), Seq: 1000}}, Pass: 1}))
}

func (s *suite) dispatch(ctx context.Context, res *Results) error {
	cfg := s.cfg
	out := &DispatchResults{Tasks: cfg.DispatchTasks, EntryBytes: getTaskEntryBytes(), Batch: cfg.DispatchBatch}
	res.Dispatch = out
	for _, c := range cfg.Concurrency {
		out.Rows = append(out.Rows, DispatchRow{Concurrency: c})
	}
	path, err := s.dataset(cfg.DispatchTasks)
	if err != nil {
		return err
	}

	s.logf("starting a 3-node raftmaster cluster, a 3-member etcd cluster and 3 raw Raft nodes")
	rm, err := harness.StartRaft(ctx, s.bin, s.dir("dispatch", "raftmaster"), 3)
	if err != nil {
		return err
	}
	defer rm.Stop()
	if _, err := rm.SetDataset(path, 10*time.Minute, 5*time.Minute); err != nil {
		return fmt.Errorf("raftmaster: set dataset: %w", err)
	}
	etcd, etcdErr := etcdmember.Start(ctx, s.exe, s.dir("dispatch", "etcd"), 3, cfg.EtcdCompaction)
	if etcdErr == nil {
		defer etcd.Stop()
	} else {
		s.logf("etcd did not start; its figures will be missing: %v", etcdErr)
	}
	raw, rawErr := rawraft.Start(ctx, s.exe, s.dir("dispatch", "rawraft"), 3)
	if rawErr == nil {
		defer raw.Stop()
	} else {
		s.logf("raw Raft did not start; its figures will be missing: %v", rawErr)
	}
	var trainers harness.Dispatch // one dataset, pass after pass
	value := strings.Repeat("v", out.EntryBytes)

	// The systems take turns within each round, so that a change in the
	// machine's background load spreads over all of them.
	for i := range out.Rows {
		row := &out.Rows[i]
		c := row.Concurrency
		load := rawraft.LoadRequest{Concurrency: c, EntryBytes: out.EntryBytes, Warmup: cfg.Warmup, Window: cfg.Window}
		// The systems, each with its series, why it did not start (if so),
		// one measurement, and how its progress line names it.
		systems := []struct {
			series  *Series
			down    error
			measure func() (measure.Run, error)
			label   func(r measure.Run) string // "raftmaster   1234 writes/s" style, padded for the columns
			logs    func() string
		}{
			{&row.Raftmaster, nil, func() (measure.Run, error) { return s.dispatchRaftmaster(ctx, rm, c, &trainers) },
				func(r measure.Run) string {
					return fmt.Sprintf("raftmaster %8.0f writes/s  (%6.0f tasks/s)", r.OpsPerSec, r.OpsPerSec/2)
				}, func() string { return "\n" + rm.LogTail() }},
			{&row.OneWrite, nil, func() (measure.Run, error) { return s.dispatchOneWrite(ctx, rm, c, &trainers) },
				func(r measure.Run) string {
					return fmt.Sprintf("raftmaster one write per task %6.0f tasks/s", r.OpsPerSec)
				}, func() string { return "\n" + rm.LogTail() }},
			{&row.Batch, nil, func() (measure.Run, error) { return s.dispatchBatch(ctx, rm, c, &trainers) },
				func(r measure.Run) string {
					return fmt.Sprintf("raftmaster batches of %-2d      %6.0f tasks/s", cfg.DispatchBatch, r.OpsPerSec)
				}, func() string { return "\n" + rm.LogTail() }},
			{&row.EtcdPut, etcdErr, func() (measure.Run, error) { return s.dispatchEtcdPut(ctx, etcd.Endpoints, c, value) },
				func(r measure.Run) string { return fmt.Sprintf("etcd Put   %8.0f puts/s   ", r.OpsPerSec) }, nil},
			{&row.RawRaft, rawErr, func() (measure.Run, error) {
				r, err := raw.Load(ctx, load)
				if err != nil && ctx.Err() == nil {
					// The baseline has no client to retry on the next
					// leader: a leader change under load (the machine
					// stalled past an election timeout) fails the run.
					// Run it again, on whichever node leads now.
					s.logf("raw raft c=%d: %v; running again", c, err)
					r, err = raw.Load(ctx, load)
				}
				return r, err
			}, func(r measure.Run) string { return fmt.Sprintf("raw Raft   %8.0f applies/s", r.OpsPerSec) }, nil},
		}
		names := []string{"raftmaster", "raftmaster one write", "raftmaster batch", "etcd", "raw raft"}
		for run := range cfg.Runs {
			// The systems take turns, starting with another one each run.
			for j := range systems {
				k := (run + j) % len(systems)
				sys := systems[k]
				if err := ctx.Err(); err != nil {
					return err
				}
				if sys.down != nil {
					sys.series.fail(sys.down)
					continue
				}
				r, err := sys.measure()
				if err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					sys.series.fail(err)
					detail := ""
					if sys.logs != nil {
						detail = sys.logs()
					}
					s.logf("%s c=%d: %v%s", names[k], c, err, detail)
					continue
				}
				sys.series.add(r)
				s.logf("dispatch c=%-3d run %d/%d  %s p50 %6.2f ms  p99 %6.2f ms", c, run+1, cfg.Runs, sys.label(r), r.P50, r.P99)
			}
		}
		row.VsEtcd = ratio(row.Raftmaster, row.EtcdPut)
		row.VsRawRaft = ratio(row.Raftmaster, row.RawRaft)
		row.RaftmasterTasks = pairTasks(row.Raftmaster)
		row.OneWriteVsPair = oneWriteVsPair(row)
		row.BatchVsPair = tasksVsPair(row, row.Batch)
		s.logf("dispatch c=%d: raftmaster/etcd %s, raftmaster/raw Raft %s; one write per task / GetTask+TaskFinished %s (%.0f / %.0f tasks/s); "+
			"batches of %d / GetTask+TaskFinished %s (%.0f tasks/s)",
			c, ratioText(row.VsEtcd), ratioText(row.VsRawRaft), ratioText(row.OneWriteVsPair), row.OneWrite.OpsPerSec.Median, row.RaftmasterTasks.Median,
			cfg.DispatchBatch, ratioText(row.BatchVsPair), row.Batch.OpsPerSec.Median)
	}
	return nil
}

// ratio is a's median throughput over b's, or 0 when either is missing.
func ratio(a, b Series) float64 {
	if !a.ok() || !b.ok() || b.OpsPerSec.Median == 0 {
		return 0
	}
	return a.OpsPerSec.Median / b.OpsPerSec.Median
}

// pairTasks is s, a series of GetTask and TaskFinished writes, in tasks
// per second (two writes a task).
func pairTasks(s Series) measure.Summary {
	if !s.ok() {
		return measure.Summary{}
	}
	return measure.Runs(s.Runs, func(r measure.Run) float64 { return r.OpsPerSec / 2 })
}

// oneWriteVsPair is row's one-write series over its pairs, in tasks per
// second, or 0 when either is missing.
func oneWriteVsPair(row *DispatchRow) float64 { return tasksVsPair(row, row.OneWrite) }

// tasksVsPair is s, a series in tasks per second, over row's pairs, or 0
// when either is missing.
func tasksVsPair(row *DispatchRow, s Series) float64 {
	tasks := pairTasks(row.Raftmaster)
	if !s.ok() || tasks.Median == 0 {
		return 0
	}
	return s.OpsPerSec.Median / tasks.Median
}

// dispatchBatch runs conc prefetching trainers of d, each with its own
// client, reading with one write per batch of DispatchBatch tasks
// (GetTasks) as fast as they can; every task finished counts. Once the
// window is over, each reports the tasks it still holds, so that the
// pass can end.
func (s *suite) dispatchBatch(ctx context.Context, c *harness.Cluster, conc int, d *harness.Dispatch) (measure.Run, error) {
	clients, err := newClients(c, conc)
	defer closeClients(clients)
	if err != nil {
		return measure.Run{}, err
	}
	readers := make([]harness.BatchReader, conc)
	for i := range readers {
		readers[i].Size = s.cfg.DispatchBatch
	}
	run, err := measure.Drive(ctx, conc, s.cfg.Warmup, s.cfg.Window, func(ctx context.Context, w *measure.Worker) error {
		return d.StepBatch(ctx, &readers[w.ID], clients[w.ID], w.Record, w.Failed)
	})
	for i := range readers {
		if rerr := d.ReleaseBatch(&readers[i], clients[i]); rerr != nil && err == nil {
			err = rerr
		}
	}
	return run, err
}

// newClients returns n clients of c; on an error, those made so far
// with it, for closeClients.
func newClients(c *harness.Cluster, n int) ([]*client.Client, error) {
	clients := make([]*client.Client, 0, n)
	for range n {
		cl, err := c.NewClient()
		if err != nil {
			return clients, err
		}
		clients = append(clients, cl)
	}
	return clients, nil
}

// closeClients closes clients.
func closeClients(clients []*client.Client) {
	for _, cl := range clients {
		cl.Close()
	}
}

// dispatchOneWrite runs conc trainers of d, each with its own client,
// reading with one write per task (GetTaskAfter) as fast as they can;
// every task finished counts. Once the window is over, each reports the
// task it still holds with TaskFinished, so that the pass can end.
func (s *suite) dispatchOneWrite(ctx context.Context, c *harness.Cluster, conc int, d *harness.Dispatch) (measure.Run, error) {
	clients, err := newClients(c, conc)
	defer closeClients(clients)
	if err != nil {
		return measure.Run{}, err
	}
	readers := make([]harness.Reader, conc)
	run, err := measure.Drive(ctx, conc, s.cfg.Warmup, s.cfg.Window, func(ctx context.Context, w *measure.Worker) error {
		return d.Step(ctx, &readers[w.ID], clients[w.ID], w.Record, w.Failed)
	})
	for i := range readers {
		if rerr := d.Release(&readers[i], clients[i]); rerr != nil && err == nil {
			err = rerr
		}
	}
	return run, err
}

// dispatchRaftmaster runs conc trainers of d, each with its own client,
// leasing tasks and reporting them finished as fast as they can; both
// writes of a pair count.
func (s *suite) dispatchRaftmaster(ctx context.Context, c *harness.Cluster, conc int, d *harness.Dispatch) (measure.Run, error) {
	clients, err := newClients(c, conc)
	defer closeClients(clients)
	if err != nil {
		return measure.Run{}, err
	}
	return measure.Drive(ctx, conc, s.cfg.Warmup, s.cfg.Window, func(ctx context.Context, w *measure.Worker) error {
		return d.Pair(ctx, clients[w.ID], func(_ harness.Op, t0, t1 time.Time) { w.Record(t0, t1) }, w.Failed)
	})
}

// dispatchEtcdPut runs conc clients, each with its own clientv3 connection
// to every member, writing small values to a key of its own.
func (s *suite) dispatchEtcdPut(ctx context.Context, endpoints []string, conc int, value string) (measure.Run, error) {
	clients := make([]*clientv3.Client, conc)
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	for i := range clients {
		var err error
		if clients[i], err = clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}); err != nil {
			return measure.Run{}, err
		}
	}
	return measure.Drive(ctx, conc, s.cfg.Warmup, s.cfg.Window, func(ctx context.Context, w *measure.Worker) error {
		key := fmt.Sprintf("/bench/put/%d", w.ID)
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		t0 := time.Now()
		_, err := clients[w.ID].Put(octx, key, value)
		t1 := time.Now()
		if err != nil {
			w.Failed(t1)
			return fmt.Errorf("etcd put: %w", err)
		}
		w.Record(t0, t1)
		return nil
	})
}

// firstLine is the first line of s, for errors in tables.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
