package bench

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/raftmaster/raftmaster/internal/bench/measure"
	"github.com/raftmaster/raftmaster/internal/bench/rawraft"
	"github.com/raftmaster/raftmaster/raftnode"
)

// systems describes what each measured system is and what one of its
// operations includes.
func systems(cfg Config) []System {
	ttl := cfg.EtcdTTL
	if ttl == 0 {
		ttl = 10 * time.Second
	}
	compaction := "no auto-compaction"
	if cfg.EtcdCompaction > 0 {
		compaction = "periodic auto-compaction every " + cfg.EtcdCompaction.String()
	}
	return []System{
		{Name: "raftmaster",
			Setup: fmt.Sprintf("3 `raftmaster serve` processes, Raft backend, default flags: heartbeat %v, election timeout %v, "+
				"leader lease %v, raft-boltdb/v2 (NoFreelistSync, map freelist, fsync on) behind a %d-entry log cache, TCP transport, a snapshot once 8,192 entries whose applies took as long as the last snapshot, or 64 MiB of them",
				raftnode.DefaultHeartbeatTimeout, raftnode.DefaultElectionTimeout, raftnode.DefaultLeaderLeaseTimeout, raftnode.LogCacheEntries),
			Includes: "Go client (one per trainer) → HTTP/JSON → leader → request de-duplication and the FSM → " +
				"Raft Apply (fsync, replication to a quorum) → answer. GetTask and TaskFinished are one write each; " +
				"read with one write per task, GetTaskAfter finishes the task held and leases the next in one write"},
		{Name: "etcd Put",
			Setup: "3 etcd v3.7.3 members (go.etcd.io/etcd/server/v3/embed), one child process each, etcd's defaults " +
				"(fsync on, snapshot every 10,000 entries, 1.5 MiB requests, 2 GiB quota), " + compaction,
			Includes: "clientv3 (one per worker, all three endpoints, gRPC) → Put of a value the size of a GetTask entry " +
				"to the worker's own key → etcd Raft (a follower forwards to the leader), WAL fsync, MVCC/bbolt → answer"},
		{Name: "raw Raft",
			Setup: fmt.Sprintf("3 hashicorp/raft v1.7.3 nodes, one child process each, no-op FSM, raft-boltdb/v2 (NoFreelistSync, map freelist, fsync on) behind a %d-entry log cache, "+
				"TCP transport (pool %d), raftmaster's timeouts (heartbeat %v, election %v, lease %v), snapshot every %d entries",
				raftnode.LogCacheEntries, rawraft.TransportPool, rawraft.HeartbeatTimeout, rawraft.ElectionTimeout, rawraft.LeaderLeaseTimeout, rawraft.SnapshotThreshold),
			Includes: "raft.Apply of an entry the size of a GetTask command, called in the leader's own process: " +
				"batching, fsync, replication to a quorum, no-op apply. No HTTP, JSON, client, de-duplication or FSM"},
		{Name: "etcd backend",
			Setup: "3 `raftmaster serve --backend etcd` masters (one active, two standbys) against a 3-member etcd cluster as above, " +
				"session TTL " + ttl.String(),
			Includes: "Go client → HTTP/JSON → active master → FSM on a working copy → the whole state, gzipped, saved to etcd " +
				"in a lock-guarded transaction → answer"},
	}
}

// Markdown renders the results as a report.
func Markdown(r *Results) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# raftmaster-bench\n\n")
	preset := "full run (defaults)"
	switch {
	case r.Config.Short:
		preset = "short run (--short)"
	case slices.Equal(r.Config.Parts, []string{PartFleet}):
		preset = "raftmaster-bench fleet"
	}
	p("%s, %s, took %s. %d CPUs (%s), %s, %s; load average %s at the start, %s at the end.\n",
		r.Started.Format("2006-01-02 15:04 MST"), preset, (time.Duration(r.Seconds) * time.Second).String(),
		r.Host.CPUs, r.Host.OS, r.Host.GoVersion, r.Host.Raftmaster, r.Host.Load, r.Host.LoadEnd)
	p("Everything ran on 127.0.0.1 of this one machine, started by the bench in a temporary directory, fsync on. ")
	fleetOnly := slices.Equal(r.Config.Parts, []string{PartFleet})
	if fleetOnly {
		p("The trainers call on their own schedules (open loops), not as fast as answers come.\n\n")
	} else {
		p("Throughput figures are the median of %d runs of %s (after %s of warm-up) with (min–max); ", r.Config.Runs, r.Config.Window, r.Config.Warmup)
		p("latencies are per-run percentiles, summarised the same way. Clients are closed loops: each waits for its answer before sending again.\n\n")
	}

	p("## Systems\n\n| system | setup | one operation includes |\n| --- | --- | --- |\n")
	for _, s := range r.Systems {
		if fleetOnly && s.Name != "raftmaster" {
			continue
		}
		p("| %s | %s | %s |\n", s.Name, s.Setup, s.Includes)
	}
	p("\n")

	if d := r.Dispatch; d != nil {
		p("## 1. Dispatch: raftmaster beside etcd Put and raw Raft Apply\n\n")
		p("raftmaster: GetTask then TaskFinished through the Go client, on a dataset of %d one-chunk tasks; every answered GetTask or TaskFinished is one write "+
			"(a pair is two writes, two Raft entries). etcd Put values and raw Raft entries are %d bytes, the size of a GetTask log entry.\n\n", d.Tasks, d.EntryBytes)
		p("| clients | raftmaster writes/s | p50 ms | p99 ms | etcd Put/s | p50 ms | p99 ms | raw Raft Apply/s | p50 ms | p99 ms | raftmaster / etcd | raftmaster / raw Raft |\n")
		p("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, row := range d.Rows {
			p("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Concurrency,
				series(row.Raftmaster, 0), sum(row.Raftmaster.P50, 2), sum(row.Raftmaster.P99, 2),
				series(row.EtcdPut, 0), sum(row.EtcdPut.P50, 2), sum(row.EtcdPut.P99, 2),
				series(row.RawRaft, 0), sum(row.RawRaft.P50, 2), sum(row.RawRaft.P99, 2),
				ratioText(row.VsEtcd), ratioText(row.VsRawRaft))
		}
		p("\n")
		if oneWriteMeasured(d) {
			p("Tasks per second: the pairs above (GetTask then TaskFinished, two writes a task; p50/p99 of each write) beside trainers that read " +
				"with one write per task: each carries the task it holds into its next GetTaskAfter, which finishes it and leases the next in one " +
				"Raft entry (p50/p99 of that write). At a pass's end the finish of its last task counts and the next pass starts with a GetTask, " +
				"which finishes nothing and does not count.\n\n")
			batched := batchMeasured(d)
			if batched {
				p("Prefetching trainers read with one write per batch: each GetTasks finishes the %d tasks a trainer holds and leases the next %d "+
					"in one Raft entry (p50/p99 of that write).\n\n", d.Batch, d.Batch)
			}
			p("| clients | GetTask+TaskFinished tasks/s | p50 ms | p99 ms | one write per task, tasks/s | p50 ms | p99 ms | one write per task / GetTask+TaskFinished |")
			if batched {
				p(" batches of %d, tasks/s | p50 ms | p99 ms | batches / GetTask+TaskFinished |", d.Batch)
			}
			p("\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
			if batched {
				p(" ---: | ---: | ---: | ---: |")
			}
			p("\n")
			for _, row := range d.Rows {
				pair := "–"
				if row.Raftmaster.ok() {
					pair = sum(row.RaftmasterTasks, 0)
				} else if row.Raftmaster.Error != "" {
					pair = "failed: " + esc(row.Raftmaster.Error)
				}
				p("| %d | %s | %s | %s | %s | %s | %s | %s |", row.Concurrency,
					pair, sum(row.Raftmaster.P50, 2), sum(row.Raftmaster.P99, 2),
					series(row.OneWrite, 0), sum(row.OneWrite.P50, 2), sum(row.OneWrite.P99, 2),
					ratioText(row.OneWriteVsPair))
				if batched {
					p(" %s | %s | %s | %s |", series(row.Batch, 0), sum(row.Batch.P50, 2), sum(row.Batch.P99, 2), ratioText(row.BatchVsPair))
				}
				p("\n")
			}
			p("\n")
		}
	}

	if g := r.Growth; g != nil {
		p("## 2. Cost growth: dispatch throughput against dataset size\n\n")
		p("%d trainers, GetTask then TaskFinished, one-chunk tasks; a fresh cluster (and, for the etcd backend, a fresh etcd) per size. "+
			"\"set\" is the time to set the dataset; \"etcd state\" is the etcd backend's saved state after the runs "+
			"(the gzipped FSM snapshot, which every write rewrites whole).\n\n", g.Concurrency)
		p("| tasks | raft backend writes/s | p50 ms | p99 ms | set | etcd backend writes/s | p50 ms | p99 ms | set | etcd state | raft / etcd backend |\n")
		p("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, row := range g.Rows {
			state := "–"
			if row.Etcd.StateBytes > 0 {
				state = fmt.Sprintf("%s (%s raw)", size(int64(row.Etcd.StateBytes)), size(row.Etcd.StateRawBytes))
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", count(row.Tasks),
				cell(row.Raft), sum(row.Raft.P50, 2), sum(row.Raft.P99, 2), secs(row.Raft.SetDatasetSeconds),
				cell(row.Etcd), sum(row.Etcd.P50, 2), sum(row.Etcd.P99, 2), secs(row.Etcd.SetDatasetSeconds), state,
				ratioText(ratio(row.Raft.Series, row.Etcd.Series)))
		}
		p("\n")
	}

	if f := r.Failover; f != nil {
		p("## 3. Fail-over: SIGKILL of the leader under load\n\n")
		p("%d trainers dispatch (GetTask, TaskFinished) on a dataset of %d tasks while the leader (the active master of the etcd backend) "+
			"is killed with SIGKILL; after each kill the node is restarted on its data and the cluster is whole again before the next. "+
			"Total is the kill → the next write acknowledged to any trainer (after the killed process was reaped). "+
			"Every trainer is the kill → the moment each trainer has had a write acknowledged, the slowest client's rediscovery included. "+
			"Phases come from polling the survivors' `GET /v1/status?stale` every %.0f ms, so a phase shorter than that may read 0.\n\n",
			f.Trainers, f.Tasks, f.PollMillis)
		p("| backend | kills | phase | p50 ms | p99 ms | min ms | max ms |\n| --- | ---: | --- | ---: | ---: | ---: | ---: |\n")
		for _, fb := range []struct {
			name string
			b    *FailoverBackend
		}{{"raft backend", f.Raft}, {"etcd backend", f.Etcd}} {
			if fb.b == nil {
				continue
			}
			if fb.b.Error != "" && len(fb.b.Kills) == 0 {
				p("| %s | 0 | failed: %s | | | | |\n", fb.name, esc(fb.b.Error))
				continue
			}
			kills := fmt.Sprint(len(fb.b.Kills))
			if fb.b.Failed > 0 {
				kills += fmt.Sprintf(" (%d without a write in 2 min)", fb.b.Failed)
			}
			if fb.b.Errors > 0 {
				kills += fmt.Sprintf(" (%d trainer calls failed after the client's retries)", fb.b.Errors)
			}
			for _, ph := range []struct {
				name string
				d    measure.Distribution
			}{
				{"**kill → next acknowledged write**", fb.b.Total},
				{"kill → a survivor names a new leader", fb.b.NewLeader},
				{"→ that leader reports ready (take-over)", fb.b.TakeOver},
				{"→ next acknowledged write (client rediscovery)", fb.b.Rediscovery},
				{"kill → every trainer had a write acknowledged", fb.b.EveryTrainer},
				{"that leader ready → the slowest trainer's write (its rediscovery)", fb.b.SlowestRediscovery},
			} {
				p("| %s | %s | %s | %s | %s | %s | %s |\n", fb.name, kills, ph.name, num(ph.d.P50, 0), num(ph.d.P99, 0), num(ph.d.Min, 0), num(ph.d.Max, 0))
				kills = ""
			}
			if fb.b.Error != "" {
				p("| %s | | stopped early: %s | | | | |\n", fb.name, esc(fb.b.Error))
			}
		}
		p("\n<details><summary>Every kill</summary>\n\n| backend | # | killed | new leader | total ms | new leader ms | take-over ms | rediscovery ms | every trainer ms | slowest rediscovery ms |\n| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, fb := range []struct {
			name string
			b    *FailoverBackend
		}{{"raft backend", f.Raft}, {"etcd backend", f.Etcd}} {
			if fb.b == nil {
				continue
			}
			for i, k := range fb.b.Kills {
				if k.Error != "" {
					p("| %s | %d | %s | | %s | | | | | |\n", fb.name, i+1, k.Node, esc(k.Error))
					continue
				}
				p("| %s | %d | %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", fb.name, i+1, k.Node, k.NewLeader, k.TotalMs, k.NewLeaderMs, k.TakeOverMs, k.RediscoveryMs, k.EveryTrainerMs, k.SlowestRediscoveryMs)
			}
		}
		p("\n</details>\n\n")
	}

	if a := r.Allgather; a != nil {
		p("## 4. Allgather\n\n")
		p("One group per run on the 3-node Raft cluster: members join through the HTTP API (%d joins in flight, sent to the leader), "+
			"and each member then long-polls its watch on node i mod 3, so all three replicas serve results. "+
			"Completion is the last join's acknowledgement (or the first result, when one comes before it) → the last member's complete result; each result carries every member's data. "+
			"Over HTTP, each answer is read in full but not decoded. "+
			"In the same run, two more groups of the same size fill through the Go client, one client (and HTTP transport) per member, as trainers would have, "+
			"each member's addresses starting at node i mod 3: by default each member decodes every member's data into Result.Data; "+
			"with JoinOptions.RawResults it gets Result.Raw alone. The members' decoding runs on the cores the cluster uses, so those rows also measure the client's work; "+
			"the ratios are each run's client completion over its HTTP completion.\n\n", joinWorkers)
		p("| peers | last join → last result over HTTP, ms | through the client, decoding, ms | ratio | through the client, raw results, ms | ratio | first join → last join acknowledged (HTTP), ms |\n")
		p("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, row := range a.Rows {
			if row.Error != "" && len(row.Runs) == 0 {
				p("| %d | failed: %s | | | | | |\n", row.Peers, esc(row.Error))
				continue
			}
			p("| %d | %s | %s | %s | %s | %s | %s |\n", row.Peers, sum(row.Completion, 1), sum(row.Client, 1), ratioSum(row.ClientRatio),
				sum(row.ClientRaw, 1), ratioSum(row.ClientRawRatio), sum(row.Joins, 0))
		}
		for _, row := range a.Rows {
			if row.Error != "" && len(row.Runs) > 0 {
				p("\n%d peers stopped after %d runs: %s\n", row.Peers, len(row.Runs), esc(row.Error))
			}
		}
		p("\n")
	}

	footprints := r.Footprints
	if r.Footprint != nil {
		footprints = append([]*FootprintResults{r.Footprint}, footprints...)
	}
	if len(footprints) > 0 {
		p("## 5. Footprint of a large dataset (Raft backend)\n\n")
	}
	for _, fp := range footprints {
		how := "GetTask by 64 trainers, none finished"
		if fp.LeaseBatch > 1 {
			how = fmt.Sprintf("GetTasks of up to %d a write by 64 trainers under their sessions, each write finishing the trainer's tasks of its write before: %s finished", fp.LeaseBatch, count(fp.Finished))
		}
		limit := "serve's defaults"
		if fp.MemoryLimit != "" {
			limit = "serve --memory-limit " + fp.MemoryLimit
		}
		p("### %s tasks (%s)\n\n", count(fp.Tasks), limit)
		p("A dataset of %s one-chunk tasks, set in %s, then %s of them leased (%s; half-way through the pass) in %s. "+
			"RSS from /proc/PID/status; the snapshot is the newest on disk.\n\n",
			count(fp.Tasks), secs(fp.SetDatasetSeconds), count(fp.Leased), how, secs(fp.LeaseSeconds))
		p("| node | role | RSS idle MB | RSS with dataset MB | RSS half-way MB | peak RSS MB | snapshot MB (at index) | applied index | raft.db MB |\n")
		p("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, n := range fp.Nodes {
			snap := "none yet"
			if n.SnapshotIndex > 0 {
				snap = fmt.Sprintf("%.1f (%d)", float64(n.SnapshotBytes)/1e6, n.SnapshotIndex)
			}
			p("| %s | %s | %.0f | %.0f | %.0f | %.0f | %s | %d | %.1f |\n", n.ID, n.Role, n.IdleRSSMB, n.DatasetRSSMB, n.LeasedRSSMB, n.PeakRSSMB,
				snap, n.AppliedIndex, float64(n.RaftDBBytes)/1e6)
		}
		p("\nA killed follower restarted on its data and reached the leader's applied index in %s ms (median (min–max) of %d restarts).\n",
			sum(fp.CatchUp, 0), fp.CatchUp.N)
		if fp.Error != "" {
			p("Stopped early: %s\n", esc(fp.Error))
		}
		p("\n")
	}

	if ss := r.Sessions; ss != nil {
		sessionsReport(p, ss)
	}
	if cr := r.Cursors; cr != nil {
		cursorsReport(p, cr)
	}
	if fr := r.Fleet; fr != nil {
		fleetReport(p, fr)
	}

	if len(r.Errors) > 0 {
		p("## Errors\n\n")
		for part, e := range r.Errors {
			p("- %s: %s\n", part, esc(firstLine(e)))
		}
		p("\n")
	}
	if len(r.Charts) > 0 {
		p("## Charts\n\n")
		for _, c := range r.Charts {
			p("![%s](%s)\n\n", strings.TrimSuffix(c, ".png"), c)
		}
	}
	return b.String()
}

// batchMeasured reports whether d has a series of batches (results of
// earlier releases have none).
func batchMeasured(d *DispatchResults) bool {
	for _, row := range d.Rows {
		if len(row.Batch.Runs) > 0 || row.Batch.Error != "" {
			return true
		}
	}
	return false
}

// oneWriteMeasured reports whether d has a one-write-per-task series (results
// of an earlier release have none).
func oneWriteMeasured(d *DispatchResults) bool {
	for _, row := range d.Rows {
		if len(row.OneWrite.Runs) > 0 || row.OneWrite.Error != "" {
			return true
		}
	}
	return false
}

// series renders a throughput median with its range, or the error.
func series(s Series, digits int) string {
	if !s.ok() {
		if s.Error != "" {
			return "failed: " + esc(s.Error)
		}
		return "–"
	}
	return sum(s.OpsPerSec, digits)
}

// cell renders a cost-growth cell: throughput, or the status that stopped it.
func cell(c GrowthCell) string {
	if c.Status != "ok" && len(c.Runs) == 0 {
		return esc(c.Status)
	}
	out := sum(c.OpsPerSec, 0)
	if c.Status != "ok" {
		out += " (then " + esc(c.Status) + ")"
	}
	return out
}

// sum renders "median (min–max)".
func sum(s measure.Summary, digits int) string {
	if s.N == 0 {
		return "–"
	}
	if s.N == 1 || s.Min == s.Max {
		return num(s.Median, digits)
	}
	return fmt.Sprintf("%s (%s–%s)", num(s.Median, digits), num(s.Min, digits), num(s.Max, digits))
}

func num(v float64, digits int) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.*f", digits, v)
}

// ratioSum formats a summary of ratios: the median, then the range.
func ratioSum(s measure.Summary) string {
	if s.N == 0 {
		return "–"
	}
	if s.N == 1 || s.Min == s.Max {
		return ratioText(s.Median)
	}
	return fmt.Sprintf("%s (%.2f–%.2fx)", ratioText(s.Median), s.Min, s.Max)
}

func ratioText(r float64) string {
	if r == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2fx", r)
}

func secs(s float64) string {
	if s == 0 {
		return "–"
	}
	return (time.Duration(s * float64(time.Second))).Round(10 * time.Millisecond).String()
}

// size writes a byte count in kB or MB.
func size(n int64) string {
	if n < 1e6 {
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// count writes 1000000 as 1,000,000.
func count(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// esc keeps a message from breaking a table row.
func esc(s string) string { return strings.ReplaceAll(firstLine(s), "|", "\\|") }

// sessionsReport renders the sessions part.
func sessionsReport(p func(string, ...any), ss *SessionsResults) {
	p("## 6. Sessions: a trainer that dies holding a task, and idle trainers\n\n")
	ttl := 0.0
	timeout := 0.0
	for _, d := range []*DeadTrainer{ss.Session, ss.Leader} {
		if d != nil && d.TTLMillis > 0 {
			ttl = d.TTLMillis
		}
		if d != nil && d.TaskTimeoutMillis > 0 {
			timeout = d.TaskTimeoutMillis
		}
	}
	p("A trainer process (the bench binary as a child, with the Go client) leases a task of a %d-task pass and holds it; "+
		"another trainer finishes the rest of the pass and then asks for a task every %.0f ms. "+
		"The holder is SIGKILLed at a random moment of its keep-alive period (with no session, of its lease renewal, every third of the lease, as the reader renews); "+
		"the figure is the SIGKILL → the held task leased to the waiting trainer. "+
		"3 `raftmaster serve` nodes with default flags: session TTL %s, task timeout %s. "+
		"One pass per kill; *exactly once* counts the passes in which each task was finished once, the last of them by the waiting trainer, "+
		"and the cluster went on to the next pass with no task set aside as failed.\n\n",
		ss.Tasks, ss.PollMillis, msText(ttl), msText(timeout))
	p("| run | kills | p50 ms | p95 ms | max ms | min ms | compare with | exactly once |\n| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n")
	for _, row := range []struct {
		name string
		d    *DeadTrainer
	}{
		{"**trainer SIGKILL, session**", ss.Session},
		{fmt.Sprintf("**trainer SIGKILL, session; leader SIGKILL %s later**", msText(ss.LeaderKillDelayMillis)), ss.Leader},
		{"trainer SIGKILL, no session (`WithoutSession`)", ss.NoSession},
	} {
		d := row.d
		if d == nil {
			continue
		}
		if d.Error != "" && len(d.Kills) == 0 {
			p("| %s | 0 | failed: %s | | | | | |\n", row.name, esc(d.Error))
			continue
		}
		kills := fmt.Sprint(len(d.Kills))
		if d.Failed > 0 {
			kills += fmt.Sprintf(" (%d without the task back in time)", d.Failed)
		}
		ref := "TTL " + msText(d.TTLMillis)
		switch {
		case d.KillsLeader:
			ref = fmt.Sprintf("2×TTL + election: p50 %s, max %s; within it: %d of %d", num(d.Bound.P50, 0), num(d.Bound.Max, 0), d.Within, d.Returned.N)
		case !d.Session:
			ref = "task timeout " + msText(d.TaskTimeoutMillis)
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %d of %d |\n", row.name, kills, num(d.Returned.P50, 0), num(d.Returned.P95, 0),
			num(d.Returned.Max, 0), num(d.Returned.Min, 0), ref, d.ExactlyOnce, d.Passes)
		if d.KillsLeader && d.Election.N > 0 {
			p("| &nbsp;&nbsp;leader SIGKILL → a new leader ready | | %s | %s | %s | %s | | |\n",
				num(d.Election.P50, 0), num(d.Election.P95, 0), num(d.Election.Max, 0), num(d.Election.Min, 0))
		}
		if d.Error != "" {
			p("| %s | | stopped early: %s | | | | | |\n", row.name, esc(d.Error))
		}
		if d.Violation != "" {
			p("| %s | | not exactly once: %s | | | | | |\n", row.name, esc(d.Violation))
		}
	}
	if ss.NoSession != nil {
		p("\nThe no-session run's job has a task timeout of %s (serve's default is 1m): without a session the task comes back when its lease, "+
			"last renewed up to a third of it before the kill, runs out.\n", msText(ss.NoSession.TaskTimeoutMillis))
	}
	p("\n<details><summary>Every kill</summary>\n\n| run | pass | task | held ms | back after ms | leader killed | new leader | election ms | 2×TTL + election ms |\n" +
		"| --- | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: |\n")
	for _, row := range []struct {
		name string
		d    *DeadTrainer
	}{{"session", ss.Session}, {"session + leader", ss.Leader}, {"no session", ss.NoSession}} {
		if row.d == nil {
			continue
		}
		for _, k := range row.d.Kills {
			if k.Error != "" {
				p("| %s | %d | %d | %.0f | %s | %s | | | |\n", row.name, k.Pass, k.Task, k.HeldMs, esc(k.Error), k.Leader)
				continue
			}
			if k.Leader == "" {
				p("| %s | %d | %d | %.0f | %.0f | | | | |\n", row.name, k.Pass, k.Task, k.HeldMs, k.ReturnedMs)
				continue
			}
			p("| %s | %d | %d | %.0f | %.0f | %s | %s | %.0f | %.0f |\n", row.name, k.Pass, k.Task, k.HeldMs, k.ReturnedMs,
				k.Leader, k.NewLeader, k.ElectionMs, k.BoundMs)
		}
	}
	p("\n</details>\n\n")

	if id := ss.Idle; id != nil {
		p("**Idle trainers.** %d trainers, each its own Go client with a session, lease a task each and hold it for %s, reading nothing "+
			"(the job's task timeout, %s, is longer than the hold: the leader revokes a held task whose trainer reports no progress for that long). "+
			"The leader's applied index is read before they start, once every one holds its task, and at the end of the hold; "+
			"the writes that opened their sessions and leased their tasks are counted by their clients.\n\n",
			id.Trainers, secs(id.HoldSeconds), msText(id.TaskTimeoutMillis))
		if id.Error != "" {
			p("Failed: %s\n\n", esc(id.Error))
		}
		if id.IndexAfter > 0 {
			p("| trainers | sessions listed | hold | applied index: before → leased → after | opened + leased | **entries while only keeping alive** | keep-alives/s served by the leader | sent by the trainers |\n")
			p("| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n")
			p("| %d | %d | %s | %d → %d → %d | %d + %d | **%d** | %.1f | %.1f |\n", id.Trainers, id.Sessions, secs(id.HoldSeconds),
				id.IndexBefore, id.IndexLeased, id.IndexAfter, id.Opened, id.Leased, id.IdleWrites, id.KeepAlivesPerSec, id.ClientKeepAlivesSec)
			p("\nEntries while only keeping alive = (after − before) − opened − leased.")
			if id.TTLMillis > 0 {
				p(" A client sends a keep-alive every third of its TTL (%s), so %d trainers send about %.0f a second.",
					msText(id.TTLMillis), id.Trainers, float64(id.Trainers)/(id.TTLMillis/3000))
			}
			if len(id.Grew) > 0 {
				var grew []string
				for k, v := range id.Grew {
					grew = append(grew, fmt.Sprintf("`%s` +%.0f", k, v))
				}
				slices.Sort(grew)
				p(" The leader's counters that grew during the hold: %s.", strings.Join(grew, ", "))
			}
			if id.LeaderChanged {
				p(" The leader changed during the hold.")
			}
			p("\n\n")
		}
	}
	if ss.Error != "" {
		p("Stopped early: %s\n\n", esc(ss.Error))
	}
}

// msText writes milliseconds as a duration, "–" for none.
func msText(ms float64) string {
	if ms <= 0 {
		return "–"
	}
	return (time.Duration(ms * float64(time.Millisecond))).Round(time.Millisecond).String()
}

// cursorsReport renders the cursors part.
func cursorsReport(p func(string, ...any), cr *CursorsResults) {
	p("## 7. Cursors: the data position saved with the model\n\n")
	p("A job of %s one-chunk tasks of %d records, the first %s of its pass finished. That state is built offline: the bench indexes the dataset file "+
		"and applies SetDataset (one chunk per task, a lease of an hour) and one GetTask and one TaskFinished per finished task to the FSM in its own process, "+
		"then writes it as a backup file (%.1f MB; %s in all). `raftmaster restore` makes the first node of a new 3-node cluster from it, "+
		"and two nodes join with serve --members (%s until all three applied it). Everything below is measured on that cluster, over HTTP to the leader: "+
		"%d tasks leased (GetTask) and reported %d records consumed (task/progress), then three series of writes one after the other, "+
		"each a POST with its own request id, timed at the client: progress reports, cursor commits (/v1/jobs/default/cursors) with no progress in them, "+
		"and cursor commits carrying the progress. The CPU time of each serve process over a series (/proc/PID/stat), divided by its writes, "+
		"says what one write costs the leader and each follower, whatever else the machine runs.\n\n",
		count(cr.Tasks), cr.RecordsPerTask, count(cr.Finished), float64(cr.BackupBytes)/1e6, secs(cr.BuildSeconds), secs(cr.StartSeconds),
		cr.InFlight, cr.RecordsPerTask/2)
	if cr.Reported.Latency.N > 0 {
		p("| writes | n | p50 ms | p95 ms | **p99 ms** | max ms | min ms | CPU a write: leader ms | a follower ms |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, row := range []struct {
			name string
			s    CommitSeries
		}{{fmt.Sprintf("progress report of the %d tasks in flight (for comparison: a write whose apply does not grow with the job)", cr.InFlight), cr.Progress},
			{"cursor commit after the holders' progress report (no progress in the commit)", cr.Reported},
			{fmt.Sprintf("cursor commit carrying the progress of the %d tasks in flight", cr.InFlight), cr.WithProgress}} {
			if l := row.s.Latency; l.N > 0 {
				p("| %s | %d | %.1f | %.1f | **%.1f** | %.1f | %.1f | %.1f | %.1f |\n", row.name, l.N, l.P50, l.P95, l.P99, l.Max, l.Min,
					row.s.LeaderCPUMs, row.s.FollowerCPUMs)
			}
		}
		p("\n")
	}
	if cr.BytesIdle > 0 {
		p("A cursor takes %s bytes of the state's size estimate (CursorInfo.Bytes) with no task in flight: %.3f bits a task. "+
			"With %d tasks in flight it takes %s bytes: %.1f bytes more per task in flight.",
			count(int(cr.BytesIdle)), float64(cr.BytesIdle)*8/float64(cr.Tasks), cr.InFlight, count(int(cr.Bytes)),
			float64(cr.Bytes-cr.BytesIdle)/float64(max(cr.InFlight, 1)))
		if cr.Kept > 0 && cr.StateAfter > 0 {
			p(" The state (a backup's length) was %.2f MB before any cursor and %.2f MB with the %d cursors the job keeps: %s bytes a cursor "+
				"(%.2f bits a task), the request de-duplication entries of the commits included.",
				float64(cr.StateBefore)/1e6, float64(cr.StateAfter)/1e6, cr.Kept,
				count(int((cr.StateAfter-cr.StateBefore)/int64(cr.Kept))), float64(cr.StateAfter-cr.StateBefore)*8/float64(cr.Kept)/float64(cr.Tasks))
		}
		p("\n\n")
	}
	if cr.Restore.N > 0 {
		p("Restoring the newest cursor (POST …/cursors/{id}/restore) took %.1f ms (median of %d; max %.1f ms); the first restore revoked %d leases.\n\n",
			cr.Restore.P50, cr.Restore.N, cr.Restore.Max, cr.RestoreRevoked)
	}
}

// fleetTarget is the fleet the report compares with: p99 call latency at
// most fleetTargetP99 ms and the leader below one core, at
// fleetTargetTrainers trainers (a task every 10 s each).
const (
	fleetTargetTrainers = 10_000
	fleetTargetP99      = 100.0
)

func fleetReport(p func(string, ...any), fr *FleetResults) {
	p("## 8. A fleet of trainers\n\n")
	p("Simulated trainers in the bench's process, each with its own Go client (its own identity and session) over one shared HTTP transport "+
		"of at most %d connections a node, each taking a task every %s ±%.0f%% (its own period; its first call, which opens its session, at a random moment of the ramp, "+
		"one cadence or as long as starting 250 trainers a second takes): "+
		"GetTaskAfter finishes the task held and leases the next in one write. A 3-node cluster of its own per fleet size, a dataset of one-chunk tasks "+
		"large enough for one pass to last the run, sessions of TTL %s (their keep-alives run in the clients' background, served from the leader's memory). "+
		"Measured for %s once every trainer has its first task: the latency of the trainers' calls (keep-alives and the first call excluded), "+
		"Raft writes/s from the leader's applied index, and the CPU of the leader's process (/proc/PID/stat, user + system) over wall time. "+
		"The bench's clients share the machine's %d cores with the three servers, and other work ran beside them: the load average is in the table.\n\n",
		fr.Connections, msText(fr.CadenceMillis), fr.CadenceSpread*100, msText(fr.SessionTTLMillis), secs(fr.WindowSeconds), fr.Hardware.Cores)
	if len(fr.Runs) > 0 {
		p("| trainers | calls/s | p50 ms | **p99 ms** | max ms | first call p50 / p99 ms | Raft writes/s | writes a call | keep-alives/s | **leader cores** | leader cores per 1,000 trainers | follower cores | bench cores | load average |\n")
		p("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
		for _, r := range fr.Runs {
			if r.Error != "" && r.Calls.N == 0 {
				p("| %s | failed: %s | | | | | | | | | | | | |\n", count(r.Trainers), esc(r.Error))
				continue
			}
			p("| %s | %.0f | %.1f | **%.1f** | %.1f | %.1f / %.1f | %.0f | %.2f | %.0f | **%.2f** | %.3f | %.2f | %.2f | %s |\n",
				count(r.Trainers), r.CallsPerSec, r.Calls.P50, r.Calls.P99, r.Calls.Max, r.First.P50, r.First.P99, r.WritesPerSec, r.WritesPerCall,
				r.KeepAlivesPerSec, r.LeaderCores, r.LeaderCoresPer1000, r.FollowerCores, r.BenchCores, r.Load)
		}
		p("\n")
		for _, r := range fr.Runs {
			var notes []string
			if r.Ramped < r.Trainers && r.RampSeconds > 0 {
				notes = append(notes, fmt.Sprintf("only %s trainers had made their first call %s after the start (ramp %s), when the window began",
					count(r.Ramped), secs(r.RampSeconds), msText(r.RampMillis)))
			}
			if r.Errors > 0 {
				notes = append(notes, fmt.Sprintf("%d calls failed", r.Errors))
			}
			if r.Late > 0 {
				notes = append(notes, fmt.Sprintf("%d calls started more than a period late", r.Late))
			}
			if r.PassEnds > 0 {
				notes = append(notes, fmt.Sprintf("%d answers ended the pass", r.PassEnds))
			}
			if r.LeaderChanged {
				notes = append(notes, "the leader changed in the window")
			}
			if len(r.ErrorKinds) > 0 {
				kinds := slices.Sorted(maps.Keys(r.ErrorKinds))
				for i, k := range kinds {
					kinds[i] = fmt.Sprintf("%d × %s", r.ErrorKinds[k], esc(k))
				}
				notes = append(notes, "failed calls, ramp included: "+strings.Join(kinds, "; "))
			}
			if r.Error != "" {
				notes = append(notes, "stopped early: "+esc(r.Error))
			}
			if len(notes) > 0 {
				p("%s trainers: %s.\n", count(r.Trainers), strings.Join(notes, "; "))
			}
		}
		for _, r := range fr.Runs {
			if r.Trainers != fleetTargetTrainers || r.Calls.N == 0 || fr.CadenceMillis != 10_000 {
				continue
			}
			verdict := func(ok bool) string {
				if ok {
					return "met"
				}
				return "not met"
			}
			leader := fmt.Sprintf("%s (%.2f cores)", verdict(r.LeaderCores < 1), r.LeaderCores)
			offered := float64(r.Trainers) / (fr.CadenceMillis / 1000)
			if r.Ramped < r.Trainers || r.CallsPerSec < 0.9*offered {
				// A fleet that did not keep its cadence offered the leader
				// less than its load: its CPU says nothing of the target.
				leader = fmt.Sprintf("not measured: the fleet did not keep its cadence (%.0f calls/s of %.0f), so the leader's %.2f cores served part of its load",
					r.CallsPerSec, offered, r.LeaderCores)
			}
			p("\nTarget, %s trainers at a task every 10 s: p99 call latency ≤ %.0f ms: %s (%.1f ms); the leader below one core: %s. "+
				"Reported, not asserted; on this shared machine.\n", count(fleetTargetTrainers), fleetTargetP99,
				verdict(r.Calls.P99 <= fleetTargetP99), r.Calls.P99, leader)
		}
		p("\n")
	}
	var modelled []FleetRun
	for _, r := range fr.Runs {
		if r.Model.WritesPerSec > 0 {
			modelled = append(modelled, r)
		}
	}
	if len(modelled) > 0 {
		p("### Extrapolated to %s trainers (a model, not a measurement)\n\n", count(fr.Extrapolate))
		p("Linear in the trainers at the same cadence and session TTL (docs/bench/fleet.md): tasks/s = trainers / cadence; "+
			"Raft writes/s = tasks/s × the writes a call measured; keep-alives/s = the measured rate a trainer × trainers; "+
			"leader cores = the leader's measured CPU a write (its keep-alives included) × writes/s, on cores as fast as this machine's (%s, %d cores). "+
			"Latency is not modelled: it holds only while the leader has cores to spare.\n\n", esc(fr.Hardware.CPUModel), fr.Hardware.Cores)
		p("| from the run of | trainers | tasks/s | Raft writes/s | keep-alives/s | leader CPU ms a write | **leader cores** | fits %d cores |\n", fr.Hardware.Cores)
		p("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
		for _, r := range modelled {
			m := r.Model
			fits := "no"
			if m.Fits {
				fits = "yes"
			}
			p("| %s | %s | %.0f | %.0f | %.0f | %.3f | **%.2f** | %s |\n", count(r.Trainers), count(m.Trainers), m.TasksPerSec, m.WritesPerSec,
				m.KeepAlivesPerSec, m.LeaderCPUMsPerWrite, m.LeaderCores, fits)
		}
		p("\n")
	}
}
