package bench

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/internal/bench/measure"
)

// TestMain lets the test binary stand in for raftmaster-bench when the
// suite re-executes itself as an etcd member or a raw Raft node.
func TestMain(m *testing.M) {
	if IsChild(os.Args) {
		os.Exit(RunChild(os.Args, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestSmoke runs the suite's cheapest configuration, dispatch at one
// client for a second against all three systems, and checks that every
// system answered and the report and charts were written. It asserts no
// figure.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nine processes")
	}
	cfg := Defaults()
	cfg.Out = t.TempDir()
	cfg.Raftmaster = os.Getenv("RAFTMASTER_BIN")
	cfg.Parts = []string{PartDispatch}
	cfg.Runs = 1
	cfg.Concurrency = []int{1}
	cfg.DispatchTasks = 100
	cfg.Warmup, cfg.Window = 0, time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress strings.Builder
	res, err := Run(ctx, cfg, io.Discard, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if len(res.Errors) > 0 || res.Dispatch == nil || len(res.Dispatch.Rows) != 1 {
		t.Fatalf("errors %v, dispatch %+v\n%s", res.Errors, res.Dispatch, progress.String())
	}
	row := res.Dispatch.Rows[0]
	for name, s := range map[string]Series{"raftmaster": row.Raftmaster, "raftmaster one write": row.OneWrite, "etcd": row.EtcdPut, "raw raft": row.RawRaft} {
		if !s.ok() || s.Runs[0].Ops == 0 {
			t.Errorf("%s: no operations measured: %+v\n%s", name, s, progress.String())
		}
	}
	for _, f := range []string{"results.md", "results.json", "dispatch.png"} {
		if _, err := os.Stat(filepath.Join(cfg.Out, f)); err != nil {
			t.Error(err)
		}
	}
	if _, err := Replot(cfg.Out); err != nil {
		t.Errorf("replot: %v", err)
	}
}

// TestDispatchReport renders a dispatch part with both raftmaster series:
// the pairs in tasks per second beside one write per task, and their
// ratio; a row without the one-write series renders a dash.
func TestDispatchReport(t *testing.T) {
	run := func(ops, p50, p99 float64) measure.Run {
		return measure.Run{Ops: int(ops * 2), Seconds: 2, OpsPerSec: ops, P50: p50, P99: p99}
	}
	var pair, one, etcd, raw Series
	for _, r := range []measure.Run{run(800, 1, 4), run(1000, 1.5, 5), run(900, 2, 6)} {
		pair.add(r)
	}
	for _, r := range []measure.Run{run(700, 2.5, 7), run(600, 3, 8), run(800, 2, 6)} {
		one.add(r)
	}
	etcd.add(run(1000, 1, 2))
	raw.add(run(1200, 1, 2))
	row := DispatchRow{Concurrency: 8, Raftmaster: pair, OneWrite: one, EtcdPut: etcd, RawRaft: raw}
	row.VsEtcd, row.VsRawRaft = ratio(row.Raftmaster, row.EtcdPut), ratio(row.Raftmaster, row.RawRaft)
	row.RaftmasterTasks = pairTasks(row.Raftmaster)
	row.OneWriteVsPair = oneWriteVsPair(&row)
	if want := (measure.Summary{Median: 450, Min: 400, Max: 500, N: 3}); row.RaftmasterTasks != want {
		t.Errorf("pair tasks/s %+v, want %+v", row.RaftmasterTasks, want)
	}
	if math.Abs(row.OneWriteVsPair-700.0/450) > 1e-9 {
		t.Errorf("one write / pair = %v, want %v", row.OneWriteVsPair, 700.0/450)
	}
	failed := DispatchRow{Concurrency: 64, Raftmaster: pair, OneWrite: Series{Error: "GetTaskAfter(3): boom"}}
	failed.RaftmasterTasks = pairTasks(failed.Raftmaster)
	failed.OneWriteVsPair = oneWriteVsPair(&failed)
	if failed.OneWriteVsPair != 0 {
		t.Errorf("ratio without a one-write series: %v", failed.OneWriteVsPair)
	}
	r := &Results{Dispatch: &DispatchResults{Tasks: 100, EntryBytes: 90, Rows: []DispatchRow{row, failed}}}
	md := Markdown(r)
	for _, want := range []string{
		"| 8 | 900 (800–1000) | 1.50 (1.00–2.00) | 5.00 (4.00–6.00) | 1000 | 1.00 | 2.00 | 1200 | 1.00 | 2.00 | 0.90x | 0.75x |",
		"| clients | GetTask+TaskFinished tasks/s | p50 ms | p99 ms | one write per task, tasks/s |",
		"| 8 | 450 (400–500) | 1.50 (1.00–2.00) | 5.00 (4.00–6.00) | 700 (600–800) | 2.50 (2.00–3.00) | 7.00 (6.00–8.00) | 1.56x |",
		"| 64 | 450 (400–500) | 1.50 (1.00–2.00) | 5.00 (4.00–6.00) | failed: GetTaskAfter(3): boom | – | – | – |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	b, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"raftmaster", "raftmaster_vs_etcd", "raftmaster_tasks_per_sec", "raftmaster_one_write", "one_write_vs_pair"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("results.json lacks %q: %s", k, b)
		}
	}
	// Results of a release before the one-write series render no table
	// for it.
	old := row
	old.OneWrite, old.RaftmasterTasks, old.OneWriteVsPair = Series{}, measure.Summary{}, 0
	if md := Markdown(&Results{Dispatch: &DispatchResults{Rows: []DispatchRow{old}}}); strings.Contains(md, "one write per task, tasks/s") {
		t.Errorf("a one-write table without figures:\n%s", md)
	}
}

// TestDispatchReportBatches renders the series of batches beside the
// pairs and one write per task, with its ratio to the pairs.
func TestDispatchReportBatches(t *testing.T) {
	run := func(ops, p50, p99 float64) measure.Run {
		return measure.Run{Ops: int(ops * 2), Seconds: 2, OpsPerSec: ops, P50: p50, P99: p99}
	}
	var pair, one, batch Series
	for _, r := range []measure.Run{run(800, 1, 4), run(1000, 1.5, 5), run(900, 2, 6)} {
		pair.add(r)
	}
	one.add(run(700, 2, 6))
	for _, r := range []measure.Run{run(3000, 3, 9), run(3600, 4, 10), run(2700, 3.5, 11)} {
		batch.add(r)
	}
	row := DispatchRow{Concurrency: 64, Raftmaster: pair, OneWrite: one, Batch: batch}
	row.RaftmasterTasks = pairTasks(row.Raftmaster)
	row.OneWriteVsPair, row.BatchVsPair = oneWriteVsPair(&row), tasksVsPair(&row, row.Batch)
	if math.Abs(row.BatchVsPair-3000.0/450) > 1e-9 {
		t.Errorf("batches / pair = %v, want %v", row.BatchVsPair, 3000.0/450)
	}
	md := Markdown(&Results{Dispatch: &DispatchResults{Tasks: 100, EntryBytes: 90, Batch: 8, Rows: []DispatchRow{row}}})
	for _, want := range []string{
		"batches of 8, tasks/s | p50 ms | p99 ms | batches / GetTask+TaskFinished |",
		"| 64 | 450 (400–500) | 1.50 (1.00–2.00) | 5.00 (4.00–6.00) | 700 | 2.00 | 6.00 | 1.56x | 3000 (2700–3600) | 3.50 (3.00–4.00) | 10.00 (9.00–11.00) | 6.67x |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

// TestAllgatherReport renders an allgather part: each size's HTTP
// completion beside the client's, decoding and with raw results, and
// their ratios; a size that failed says so. It checks that completion
// starts at the first result when that came before the last join's
// acknowledgement.
func TestAllgatherReport(t *testing.T) {
	t0 := time.Now()
	at := func(ms ...int) []time.Time {
		out := make([]time.Time, len(ms))
		for i, m := range ms {
			out[i] = t0.Add(time.Duration(m) * time.Millisecond)
		}
		return out
	}
	if last, took := completion(at(10, 30, 20), at(50, 60, 70)); !last.Equal(t0.Add(30*time.Millisecond)) || took != 40*time.Millisecond {
		t.Errorf("completion: last join %v, took %v; want 30ms, 40ms", last.Sub(t0), took)
	}
	if _, took := completion(at(10, 90, 20), at(50, 60, 100)); took != 50*time.Millisecond {
		t.Errorf("completion with a result before the last acknowledgement took %v, want 50ms", took)
	}
	row := AllgatherRow{Peers: 4096, Runs: []AllgatherRun{
		{JoinsMs: 900, CompletionMs: 700, ClientMs: 7000, ClientRawMs: 1400},
		{JoinsMs: 1000, CompletionMs: 800, ClientMs: 6400, ClientRawMs: 1200},
		{JoinsMs: 1100, CompletionMs: 1000, ClientMs: 9000, ClientRawMs: 1800},
	}}
	row.summarize()
	failed := AllgatherRow{Peers: 64, Error: "join 3: boom"}
	md := Markdown(&Results{Allgather: &AllgatherResults{Rows: []AllgatherRow{failed, row}}})
	for _, want := range []string{
		"| peers | last join → last result over HTTP, ms | through the client, decoding, ms | ratio | through the client, raw results, ms | ratio |",
		"| 4096 | 800.0 (700.0–1000.0) | 7000.0 (6400.0–9000.0) | 9.00x (8.00–10.00x) | 1400.0 (1200.0–1800.0) | 1.80x (1.50–2.00x) | 1000 (900–1100) |",
		"| 64 | failed: join 3: boom |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

// TestSessionsReport renders a sessions part: every run and the idle
// trainers have their row.
func TestSessionsReport(t *testing.T) {
	kill := TrainerKill{Pass: 0, Task: 2, Session: 7, HeldMs: 900, ReturnedMs: 4800}
	run := func(session, leader bool) *DeadTrainer {
		d := &DeadTrainer{Job: "j", Session: session, KillsLeader: leader, TTLMillis: 5000, TaskTimeoutMillis: 60000,
			Kills: []TrainerKill{kill}, Returned: measure.Distribute([]float64{4800}), Passes: 1, ExactlyOnce: 1}
		if leader {
			d.Kills[0].Leader, d.Kills[0].NewLeader, d.Kills[0].ElectionMs, d.Kills[0].BoundMs = "n1", "n2", 700, 10700
			d.Election, d.Bound, d.Within = measure.Distribute([]float64{700}), measure.Distribute([]float64{10700}), 1
		}
		if !session {
			d.TTLMillis, d.TaskTimeoutMillis = 0, 10000
		}
		return d
	}
	r := &Results{Sessions: &SessionsResults{Tasks: 4, PollMillis: 20, LeaderKillDelayMillis: 1000,
		Session: run(true, false), Leader: run(true, true), NoSession: run(false, false),
		Idle: &IdleTrainers{Trainers: 100, HoldSeconds: 60, TaskTimeoutMillis: 120000, TTLMillis: 5000, Sessions: 100,
			IndexBefore: 10, IndexLeased: 210, IndexAfter: 210, Opened: 100, Leased: 100, KeepAlivesPerSec: 60, ClientKeepAlivesSec: 60}}}
	md := Markdown(r)
	for _, want := range []string{"## 6. Sessions", "**trainer SIGKILL, session**", "leader SIGKILL 1s later", "within it: 1 of 1",
		"task timeout 10s", "| 100 | 100 | 1m0s | 10 → 210 → 210 | 100 + 100 | **0** |", "1 of 1 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

// TestSessionsSmoke runs the sessions part at its smallest: one kill per
// run and a few idle trainers for a few seconds, and checks that every run
// completed, each pass exactly once. It asserts no figure.
func TestSessionsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six processes and kills some")
	}
	cfg := Defaults()
	cfg.Out = t.TempDir()
	cfg.Raftmaster = os.Getenv("RAFTMASTER_BIN")
	cfg.Parts = []string{PartSessions}
	cfg.SessionKills, cfg.BaselineKills, cfg.BaselineTaskTimeout = 1, 1, 2*time.Second
	cfg.IdleTrainers, cfg.IdleHold = 3, 3*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress strings.Builder
	res, err := Run(ctx, cfg, io.Discard, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	ss := res.Sessions
	if len(res.Errors) > 0 || ss == nil || ss.Idle == nil {
		t.Fatalf("errors %v, sessions %+v\n%s", res.Errors, ss, progress.String())
	}
	for name, d := range map[string]*DeadTrainer{"session": ss.Session, "session and leader": ss.Leader, "no session": ss.NoSession} {
		if d == nil || d.Error != "" || d.Failed > 0 || len(d.Kills) != 1 || d.Passes != 1 || d.ExactlyOnce != 1 {
			t.Errorf("%s: %+v\n%s", name, d, progress.String())
		}
	}
	if id := ss.Idle; id.Error != "" || id.Sessions != cfg.IdleTrainers || id.Opened != cfg.IdleTrainers || id.Leased != cfg.IdleTrainers {
		t.Errorf("idle trainers: %+v\n%s", id, progress.String())
	}
}

// TestCursorsSmoke runs the cursors part at a small size: the state built
// offline is the one the cluster serves after restore and join, every
// commit names the finished and in-flight tasks, and the report has every
// series. It asserts no latency.
func TestCursorsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	cfg := Defaults()
	cfg.Out = t.TempDir()
	cfg.Raftmaster = os.Getenv("RAFTMASTER_BIN")
	cfg.Parts = []string{PartCursors}
	cfg.Runs = 2
	cfg.CursorTasks, cfg.CursorInFlight, cfg.CursorCommits = 1000, 4, 20
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress strings.Builder
	res, err := Run(ctx, cfg, io.Discard, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	cr := res.Cursors
	if len(res.Errors) > 0 || cr == nil {
		t.Fatalf("errors %v, cursors %+v\n%s", res.Errors, cr, progress.String())
	}
	// 1000 tasks: 16 words of done bits; 8 bytes each task in flight.
	if cr.Finished != 500 || cr.BytesIdle <= 16*8 || cr.Bytes != cr.BytesIdle+4*8 || cr.Kept != 16 ||
		cr.StateAfter <= cr.StateBefore || cr.Restore.N != 2 || cr.RestoreRevoked != 4 {
		t.Errorf("cursors %+v\n%s", cr, progress.String())
	}
	for name, s := range map[string]CommitSeries{"progress": cr.Progress, "reported": cr.Reported, "with progress": cr.WithProgress} {
		if s.Latency.N != cfg.CursorCommits {
			t.Errorf("%s: %d writes timed, want %d", name, s.Latency.N, cfg.CursorCommits)
		}
	}
	md := Markdown(res)
	for _, want := range []string{"## 7. Cursors", "| cursor commit after the holders' progress report", "| cursor commit carrying the progress of the 4 tasks", "1,000 one-chunk tasks"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

// TestAckLogEveryAfter: every trainer's first acknowledgement after t is
// the slowest trainer's, and none while one trainer has none.
func TestAckLogEveryAfter(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var a ackLog
	a.add(0, at(-5)) // before t: not counted
	a.add(0, at(30))
	a.add(1, at(10))
	a.add(0, at(20))
	if _, ok := a.everyAfter(t0, 3); ok {
		t.Fatal("everyAfter holds while trainer 2 has no acknowledgement")
	}
	a.add(2, at(50))
	a.add(1, at(60))
	got, ok := a.everyAfter(t0, 3)
	if !ok || !got.Equal(at(50)) {
		t.Fatalf("everyAfter = %v, %v; want trainer 2's first, +50ms", got.Sub(t0), ok)
	}
	if first, _ := a.firstAfter(t0); !first.Equal(at(10)) {
		t.Fatalf("firstAfter = %v, want +10ms", first.Sub(t0))
	}
}

// TestFootprintSmoke runs the footprint part on two small datasets, one
// under a memory limit: each is leased half-way in batches that finish
// the batch before, every node's sizes are taken, a follower catches up,
// and the report has a section for each.
func TestFootprintSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six processes")
	}
	cfg := Defaults()
	cfg.Out = t.TempDir()
	cfg.Raftmaster = os.Getenv("RAFTMASTER_BIN")
	cfg.Parts = []string{PartFootprint}
	cfg.Runs = 1
	cfg.Footprints = []FootprintSpec{{Tasks: 2_000}, {Tasks: 1_000, MemoryLimit: "256MiB"}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress strings.Builder
	res, err := Run(ctx, cfg, io.Discard, &progress)
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("%v %v\n%s", err, res.Errors, progress.String())
	}
	if len(res.Footprints) != 2 {
		t.Fatalf("%d footprints, want 2", len(res.Footprints))
	}
	for i, fp := range res.Footprints {
		spec := cfg.Footprints[i]
		// Each trainer's last batch is still held: at most 64 batches.
		if fp.Tasks != spec.Tasks || fp.MemoryLimit != spec.MemoryLimit || fp.Leased != spec.Tasks/2 ||
			fp.Finished > fp.Leased || fp.Finished < fp.Leased-64*fp.LeaseBatch || fp.CatchUp.N != 1 {
			t.Errorf("footprint %d: %+v", i, fp)
		}
		for _, n := range fp.Nodes {
			if n.DatasetRSSMB <= 0 || n.LeasedRSSMB <= 0 || n.AppliedIndex == 0 || n.Role == "" {
				t.Errorf("footprint %d, node %+v: sizes not taken", i, n)
			}
		}
	}
	md := Markdown(res)
	for _, want := range []string{"### 2,000 tasks (serve's defaults)", "### 1,000 tasks (serve --memory-limit 256MiB)", "RSS half-way MB"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}
