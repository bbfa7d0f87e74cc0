package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/leader"
	"github.com/raftmaster/raftmaster/internal/procs"
	"github.com/raftmaster/raftmaster/recordio"
	"github.com/raftmaster/raftmaster/store"
	"github.com/urfave/cli/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure task dispatch on throwaway local clusters, Raft beside the etcd backend",
		UsageText: "raftmaster bench [--clients 8] [--tasks 2000] [--passes 1]\n" +
			"raftmaster bench --etcd-endpoints http://127.0.0.1:2379   # also bench the etcd backend",
		Description: "Starts its own servers on 127.0.0.1 in a temporary directory (a bench never\n" +
			"touches a running cluster's dataset): a --nodes Raft cluster and, with\n" +
			"--etcd-endpoints, one etcd-backend master under a fresh key prefix that is deleted\n" +
			"afterwards. It writes a RecordIO dataset of --tasks one-record chunks, then\n" +
			"--clients trainers run --passes passes of GetTask and TaskFinished as fast as they\n" +
			"can. It prints throughput and latency per backend, and each backend's throughput\n" +
			"as a ratio of the first one's, measured in the same run.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "nodes", Value: 3, Usage: "replicas of the Raft cluster"},
			&cli.IntFlag{Name: "clients", Value: 8, Usage: "concurrent trainers"},
			&cli.IntFlag{Name: "tasks", Value: 2000, Usage: "tasks per pass"},
			&cli.IntFlag{Name: "passes", Value: 1, Usage: "passes to run"},
			&cli.StringFlag{Name: "etcd-endpoints", Usage: "an etcd to bench the etcd backend against, comma separated"},
			&cli.BoolFlag{Name: "json", Usage: "print the results as JSON"},
		},
		Action: runBench,
	}
}

// benchResult is one backend's figures.
type benchResult struct {
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

func runBench(c *cli.Context) error {
	nodes, clients, tasks, passes := c.Int("nodes"), c.Int("clients"), c.Int("tasks"), c.Int("passes")
	if nodes < 1 || nodes > 9 || clients < 1 || clients > 1000 || tasks < 1 || tasks > 1_000_000 || passes < 1 || passes > 100 {
		return fmt.Errorf("want 1 <= --nodes <= 9, 1 <= --clients <= 1000, 1 <= --tasks <= 1000000 and 1 <= --passes <= 100")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "raftmaster-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	glob, err := writeBenchDataset(dir, tasks)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	w := workload{clients: clients, tasks: tasks, passes: passes, glob: glob, progress: c.App.ErrWriter}

	var results []benchResult
	raft, err := startRaftBench(exe, dir, nodes)
	if err != nil {
		return err
	}
	r, err := w.run(ctx, "raft", raft.apis())
	raft.stop()
	if err != nil {
		return fmt.Errorf("raft backend: %w\n%s", err, raft.logTail())
	}
	r.Nodes = nodes
	results = append(results, r)

	if endpoints := splitList(c.String("etcd-endpoints")); len(endpoints) > 0 {
		master, err := startEtcdBench(exe, dir, endpoints)
		if err != nil {
			return err
		}
		r, err := w.run(ctx, "etcd", master.apis())
		master.stop()
		master.cleanup()
		if err != nil {
			return fmt.Errorf("etcd backend: %w\n%s", err, master.logTail())
		}
		r.Nodes = 1
		results = append(results, r)
	}
	for i := range results {
		results[i].Ratio = results[i].OpsPerSec / results[0].OpsPerSec
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tNODES\tCLIENTS\tTASKS/PASS\tPASSES\tOPS\tSECONDS\tOPS/S\tVS FIRST\tGETTASK P50\tP99\tFINISHED P50\tP99")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.0f\t%.2fx\t%s\t%s\t%s\t%s\n", r.Backend, r.Nodes, r.Clients, r.Tasks, r.Passes,
			r.Ops, r.Seconds, r.OpsPerSec, r.Ratio, r.GetP50, r.GetP99, r.FinishP50, r.FinishP99)
	}
	return tw.Flush()
}

// writeBenchDataset writes n one-record chunks, so that one chunk per task
// gives n tasks.
func writeBenchDataset(dir string, n int) (string, error) {
	path := filepath.Join(dir, "bench.recordio")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	w := recordio.NewWriter(f, 1, recordio.NoCompression) // every record closes its chunk
	for i := range n {
		if _, err := w.Write([]byte(fmt.Sprintf("record-%d", i))); err != nil {
			return "", err
		}
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return path, f.Close()
}

// workload is the trainers' side of a bench.
type workload struct {
	clients, tasks, passes int
	glob                   string
	progress               io.Writer
}

func (w workload) run(ctx context.Context, backend string, addrs []string) (benchResult, error) {
	res := benchResult{Backend: backend, Clients: w.clients, Tasks: w.tasks, Passes: w.passes}
	setter, err := client.NewClient(client.WithAddrs(addrs...), client.WithRetry(time.Minute))
	if err != nil {
		return res, err
	}
	defer setter.Close()
	if _, err := setter.SetDatasetWithParams([]string{w.glob}, client.DatasetParams{ChunksPerTask: 1, TaskTimeout: 10 * time.Minute}); err != nil {
		return res, fmt.Errorf("set dataset: %w", err)
	}
	var finished atomic.Int64
	done := make(chan struct{})
	go w.report(backend, &finished, done)
	defer close(done)

	type lat struct{ get, fin []time.Duration }
	lats := make([]lat, w.clients)
	errs := make([]error, w.clients)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range w.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := client.NewClient(client.WithAddrs(addrs...), client.WithRetry(time.Minute))
			if err != nil {
				errs[i] = err
				return
			}
			defer cl.Close()
			errs[i] = w.trainer(ctx, cl, &finished, &lats[i].get, &lats[i].fin)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	var get, fin []time.Duration
	for _, l := range lats {
		get, fin = append(get, l.get...), append(fin, l.fin...)
	}
	res.Ops = len(get) + len(fin)
	res.Seconds = elapsed.Seconds()
	res.OpsPerSec = float64(res.Ops) / elapsed.Seconds()
	res.GetP50, res.GetP99 = percentile(get, 0.50), percentile(get, 0.99)
	res.FinishP50, res.FinishP99 = percentile(fin, 0.50), percentile(fin, 0.99)
	return res, nil
}

// trainer takes and finishes tasks until every pass is over. A trainer
// that finds the pass fully dispatched moves on to the next one and waits
// there for the others, as the original client does.
func (w workload) trainer(ctx context.Context, cl *client.Client, finished *atomic.Int64, get, fin *[]time.Duration) error {
	for pass := 0; pass < w.passes; {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		task, err := cl.GetTask(pass)
		switch {
		case err == nil:
		case errors.Is(err, client.ErrPassBefore), errors.Is(err, client.ErrNoMoreAvailable):
			pass++
			continue
		case errors.Is(err, client.ErrPassAfter):
			leader.Sleep(ctx, time.Millisecond)
			continue
		default:
			return fmt.Errorf("GetTask(%d): %w", pass, err)
		}
		t1 := time.Now()
		if err := cl.TaskFinished(task.Meta); err != nil {
			return fmt.Errorf("TaskFinished(%d): %w", task.Meta.ID, err)
		}
		*get = append(*get, t1.Sub(t0))
		*fin = append(*fin, time.Since(t1))
		finished.Add(1)
	}
	return nil
}

// report prints the progress every second.
func (w workload) report(backend string, finished *atomic.Int64, done <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	total := w.tasks * w.passes
	for {
		select {
		case <-done:
			fmt.Fprintf(w.progress, "%s: %d/%d tasks finished\n", backend, finished.Load(), total)
			return
		case <-tick.C:
			fmt.Fprintf(w.progress, "%s: %d/%d tasks finished\n", backend, finished.Load(), total)
		}
	}
}

func percentile(d []time.Duration, q float64) string {
	if len(d) == 0 {
		return "-"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))].Round(10 * time.Microsecond).String()
}

// benchServers are the serve processes of one backend.
type benchServers struct {
	nodes   []*procs.Proc
	cleanup func()
}

func (s *benchServers) apis() []string {
	var out []string
	for _, p := range s.nodes {
		out = append(out, p.APIAddr)
	}
	return out
}

func startRaftBench(exe, dir string, nodes int) (*benchServers, error) {
	raftAddrs, apis := make([]string, nodes), make([]string, nodes)
	for i := range nodes {
		var err error
		if raftAddrs[i], err = procs.FreeAddr(); err != nil {
			return nil, err
		}
		if apis[i], err = procs.FreeAddr(); err != nil {
			return nil, err
		}
	}
	keyArgs, err := procs.ClusterKeyArgs(filepath.Join(dir, "raft"))
	if err != nil {
		return nil, err
	}
	s := &benchServers{nodes: procs.RaftProcs(filepath.Join(dir, "raft"), raftAddrs, apis, keyArgs...), cleanup: func() {}}
	return s, s.start(exe)
}

func startEtcdBench(exe, dir string, endpoints []string) (*benchServers, error) {
	prefix := "/raftmaster-bench-" + uuid.NewString()
	api, err := procs.FreeAddr()
	if err != nil {
		return nil, err
	}
	m := &procs.Proc{ID: "m1", APIAddr: api, LogPath: filepath.Join(dir, "etcd-m1.log"),
		Args: []string{"serve", "--backend", "etcd", "--node-id", "m1", "--http-addr", api,
			"--etcd-endpoints", strings.Join(endpoints, ","), "--etcd-prefix", prefix}}
	s := &benchServers{nodes: []*procs.Proc{m}}
	s.cleanup = func() {
		cli, err := store.NewEtcdClient(endpoints, 5*time.Second, 0, store.EtcdAuth{})
		if err != nil {
			return
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = cli.Delete(ctx, prefix+"/", clientv3.WithPrefix())
	}
	if err := s.start(exe); err != nil {
		s.cleanup()
		return nil, err
	}
	return s, nil
}

// start launches the servers and waits up to a minute until they are
// ready; on failure it stops them.
func (s *benchServers) start(exe string) error {
	for _, p := range s.nodes {
		if err := p.Launch(exe); err != nil {
			s.stop()
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := procs.WaitReady(ctx, s.apis(), nil); err != nil {
		s.stop()
		return fmt.Errorf("bench servers: %w\n%s", err, s.logTail())
	}
	return nil
}

// stop sends SIGTERM, then SIGKILL to what still runs after 10s.
func (s *benchServers) stop() { procs.StopAll(s.nodes, 10*time.Second) }

// logTail returns the last lines of every server's log, for errors.
func (s *benchServers) logTail() string { return procs.LogTail(s.nodes, 10) }
