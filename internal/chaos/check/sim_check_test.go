package check

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

func bigSim(seed uint64, unknownRate float64) simConfig {
	return simConfig{
		seed: seed, clients: 5, ops: 2000, tasks: 8, timeout: 10 * time.Millisecond,
		unknownRate: unknownRate, graceEvery: 150, grace: 3 * time.Millisecond,
		tickLag: time.Millisecond, groups: 20,
	}
}

// sessionSim is bigSim with the trainers under sessions of 4 ms, less
// than the task timeout, one lease in ten followed by a stall that ends
// the session.
func sessionSim(seed uint64, unknownRate float64) simConfig {
	sc := bigSim(seed, unknownRate)
	sc.sessions, sc.ttl, sc.stallEvery = true, 4*time.Millisecond, 10
	return sc
}

func simCheckConfig(t testing.TB, sc simConfig) Config {
	return Config{
		NumTasks: sc.tasks, TaskTimeout: sc.timeout,
		// Covers the tick lag, the grace and the clock jump of a new
		// leader: see simulate.
		Grace:        20 * time.Millisecond,
		VisualizeDir: t.TempDir(),
	}
}

type simStats struct {
	ops, unknown, dispatches, redispatches, stale, failed, passes, grants, denials int
	// Sessions: opened, stalls, writes refused session_expired, and held
	// tasks leased again within the task timeout (their session ended).
	sessions, stalls, refused, heldTakenOver int
	// FinishAndGet calls with a known answer: in all, those whose finish
	// was refused stale, those whose lease was refused (the finish applied
	// all the same), those that leased the task they finished; and those
	// whose outcome is unknown.
	finishAndGets, finishAndGetStale, finishAndGetRefused, finishAndGetSame, finishAndGetUnknown int
}

func statsOf(o []history.Op) simStats {
	var s simStats
	held := map[int]history.Op{} // the last lease of each task
	for _, op := range o {
		switch op.Kind {
		case history.OpenSession:
			s.sessions++
			continue
		case history.Stall:
			s.stalls++
			continue
		}
		if op.Code == "session_expired" {
			s.refused++
		}
		if op.Kind == history.FinishAndGet {
			switch {
			case op.Unknown():
				s.finishAndGetUnknown++
			case op.Finish == nil:
			default:
				s.finishAndGets++
				if op.Finish.Code == "stale_epoch" {
					s.finishAndGetStale++
				}
				if op.Code != "" {
					s.finishAndGetRefused++
				}
				if op.Code == "" && op.Task.ID == op.Meta.ID {
					s.finishAndGetSame++
				}
			}
		}
		leased := (op.Kind == history.GetTask || op.Kind == history.FinishAndGet) && op.Code == "" && !op.Unknown()
		if leased {
			if g, ok := held[op.Task.ID]; ok && g.Holder != 0 && g.Task.Epoch < op.Task.Epoch && op.AppliedAt-g.AppliedAt < int64(10*time.Millisecond) {
				s.heldTakenOver++
			}
			held[op.Task.ID] = op
		}
		s.ops++
		if op.Unknown() {
			s.unknown++
			continue
		}
		switch {
		case leased:
			s.dispatches++
			s.passes = max(s.passes, op.Pass+1)
		case op.Kind == history.TaskFinished && op.Code == "stale_epoch":
			s.stale++
		case op.Kind == history.TaskFailed && !op.Ignored:
			s.failed++
		case op.Kind == history.SaveModel && op.Granted:
			s.grants++
		case op.Kind == history.SaveModel:
			s.denials++
		}
	}
	s.redispatches = s.dispatches - 8*s.passes
	return s
}

// TestSimulatedHistories checks long concurrent histories produced by a
// simulator that follows the specification: five clients, 2000 task and
// save-model operations, unknown outcomes, expired leases, late finishes,
// leader changes with clock jumps and grace, and allgather groups. Every
// checker must pass them. The time the checks take is logged.
func TestSimulatedHistories(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		sc := bigSim(seed, 0.03)
		o := simulate(sc)
		st := statsOf(o)
		t.Logf("seed %d: %+v", seed, st)
		if st.unknown == 0 || st.stale == 0 || st.failed == 0 || st.passes < 5 || st.redispatches <= 0 || st.denials == 0 {
			t.Fatalf("seed %d: the simulation does not cover the interesting cases: %+v", seed, st)
		}
		cfg := simCheckConfig(t, sc)
		res, err := Linearizable(o, cfg, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != porcupine.Ok {
			t.Fatalf("seed %d: %v", seed, res.Err())
		}
		t.Logf("seed %d: Linearizable: %d ops in %d partitions in %v (relaxed=%v, unattributed=%d)",
			seed, res.Ops, res.Partitions, res.Elapsed, res.Relaxed, res.Unattributed)
		start := time.Now()
		errs := All(o, cfg)
		t.Logf("seed %d: All: %v", seed, time.Since(start))
		for _, err := range errs {
			t.Errorf("seed %d: %v", seed, err)
		}
		cfg.Grace = 0
		if errs := All(o, cfg); len(errs) != 0 {
			t.Errorf("seed %d, unbounded grace: %v", seed, errs)
		}
	}
}

// TestSimulatedSessionHistories is TestSimulatedHistories with the
// trainers under sessions, some of which end while their trainer stalls
// holding a task, which others lease again before the task timeout.
func TestSimulatedSessionHistories(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		sc := sessionSim(seed, 0.03)
		o := simulate(sc)
		st := statsOf(o)
		t.Logf("seed %d: %+v", seed, st)
		if st.unknown == 0 || st.stale == 0 || st.passes < 5 || st.stalls == 0 || st.refused == 0 || st.heldTakenOver == 0 || st.sessions <= sc.clients {
			t.Fatalf("seed %d: the simulation does not cover the interesting cases: %+v", seed, st)
		}
		for _, err := range All(o, simCheckConfig(t, sc)) {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
}

// finishAndGetSim has the first three of its five clients report their
// finishes on their next GetTask (history.FinishAndGet).
func finishAndGetSim(sc simConfig) simConfig {
	sc.combined = 3
	return sc
}

// TestSimulatedFinishAndGetHistories is TestSimulatedHistories, and its
// sessions variant, with three of the five trainers reporting each finish
// on their next GetTask: the checkers must pass those histories too.
func TestSimulatedFinishAndGetHistories(t *testing.T) {
	for _, sessions := range []bool{false, true} {
		for _, seed := range []uint64{1, 2, 3, 4} {
			sc := finishAndGetSim(bigSim(seed, 0.03))
			if sessions {
				sc = finishAndGetSim(sessionSim(seed, 0.03))
			}
			o := simulate(sc)
			st := statsOf(o)
			t.Logf("seed %d, sessions %v: %+v", seed, sessions, st)
			if st.finishAndGets < 200 || st.finishAndGetStale == 0 || st.finishAndGetRefused == 0 || st.finishAndGetUnknown == 0 ||
				st.passes < 5 || st.redispatches <= 0 {
				t.Fatalf("seed %d: the simulation does not cover the interesting cases: %+v", seed, st)
			}
			cfg := simCheckConfig(t, sc)
			res, err := Linearizable(o, cfg, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != porcupine.Ok {
				t.Fatalf("seed %d: %v", seed, res.Err())
			}
			for _, err := range All(o, cfg) {
				t.Errorf("seed %d, sessions %v: %v", seed, sessions, err)
			}
		}
	}
}

// mutation corrupts a valid simulated history the way a bug would, and
// names the checkers that must notice.
type mutation struct {
	name string
	// mutate corrupts the history; sim, when set, makes the simulated
	// FSM a broken one instead (or as well).
	mutate func(t *testing.T, o []history.Op) []history.Op
	sim    func(*simConfig)
	// lin is whether Linearizable must fail; others lists substrings one
	// of All's other errors must contain.
	lin    bool
	others []string
	// sessions mutates a history of sessionSim.
	sessions bool
}

func TestSimulatedMutationsAreCaught(t *testing.T) {
	mutations := []mutation{
		{name: "lease handed to a second client", lin: true, others: []string{"dispatched twice"},
			mutate: func(t *testing.T, o []history.Op) []history.Op {
				i := find(t, o, len(o)/2, func(op history.Op) bool { return op.Kind == history.GetTask && op.Code == "" })
				dup := o[i]
				dup.Client = (dup.Client + 1) % 5
				dup.AppliedAt++
				return append(o, dup)
			}},
		{name: "accepted finish lost", lin: true, others: []string{"lost in pass 0"},
			mutate: func(t *testing.T, o []history.Op) []history.Op {
				i := find(t, o, 0, func(op history.Op) bool {
					return op.Kind == history.TaskFinished && op.Code == "" && !op.Unknown()
				})
				return slices.Delete(o, i, i+1)
			}},
		{name: "epoch skipped", lin: true, others: []string{"dispatched twice"},
			mutate: func(t *testing.T, o []history.Op) []history.Op {
				i := find(t, o, len(o)/3, func(op history.Op) bool { return op.Kind == history.GetTask && op.Code == "" })
				m := o[i].Task
				for j := range o {
					if o[j].Kind == history.GetTask && o[j].Task == m {
						o[j].Task.Epoch++
					}
					if (o[j].Kind == history.TaskFinished || o[j].Kind == history.TaskFailed) && o[j].Meta == m {
						o[j].Meta.Epoch++
					}
				}
				return o
			}},
		{name: "save lease granted to a second trainer", lin: true, others: []string{"single save holder"},
			mutate: func(t *testing.T, o []history.Op) []history.Op {
				i := find(t, o, 0, func(op history.Op) bool {
					if op.Kind != history.SaveModel || op.Granted || op.Unknown() {
						return false
					}
					var last *history.Op
					for k := range o {
						g := &o[k]
						if g.Kind == history.SaveModel && g.Granted && !g.Unknown() && g.AppliedAt < op.AppliedAt &&
							(last == nil || g.AppliedAt > last.AppliedAt) {
							last = g
						}
					}
					return last != nil && last.Trainer != op.Trainer && op.AppliedAt < last.AppliedAt+int64(last.BlockDur)
				})
				o[i].Granted = true
				return o
			}},
		{name: "dispatch seen after its own finish", lin: true,
			mutate: func(t *testing.T, o []history.Op) []history.Op {
				f := find(t, o, len(o)/2, func(op history.Op) bool {
					return op.Kind == history.TaskFinished && op.Code == "" && !op.Unknown()
				})
				g := find(t, o, 0, func(op history.Op) bool { return op.Kind == history.GetTask && op.Task == o[f].Meta })
				o[g].Invoke, o[g].Return = o[f].Return+1, o[f].Return+2
				return o
			}},
		{name: "late finish accepted", lin: true,
			mutate: func(t *testing.T, o []history.Op) []history.Op {
				i := find(t, o, 0, func(op history.Op) bool {
					if op.Kind != history.TaskFinished || op.Code != "stale_epoch" {
						return false
					}
					// A later lease of the task was applied before.
					return slices.ContainsFunc(o, func(g history.Op) bool {
						return g.Kind == history.GetTask && g.Task.ID == op.Meta.ID && g.Task.Epoch > op.Meta.Epoch && g.AppliedAt < op.AppliedAt
					})
				})
				o[i].Code = ""
				return o
			}},
		{name: "request of an ended session applied", sessions: true, lin: true, others: []string{"sessions hold tasks alone", "lived on"},
			mutate: func(t *testing.T, o []history.Op) []history.Op {
				// A finish refused after its session ended, while the task
				// it held was leased again: applied instead, after the new
				// lease, as a stale finish.
				var again history.Op
				i := find(t, o, 0, func(op history.Op) bool {
					if op.Kind != history.TaskFinished || op.Code != "session_expired" {
						return false
					}
					var g history.Op
					for _, h := range o {
						if h.Kind == history.GetTask && h.Code == "" && h.Task == op.Meta {
							g = h
						}
					}
					for _, h := range o {
						if h.Kind == history.GetTask && h.Code == "" && h.Task.ID == op.Meta.ID && h.Task.Epoch == op.Meta.Epoch+1 &&
							h.AppliedAt < g.AppliedAt+int64(10*time.Millisecond) && h.Return < op.Return {
							again = h
							return true
						}
					}
					return false
				})
				o[i].Code, o[i].AppliedAt = "stale_epoch", again.AppliedAt+1
				return o
			}},
		{name: "write applied after its session was refused", sessions: true, others: []string{"no write of an ended session applied"},
			mutate: func(t *testing.T, o []history.Op) []history.Op {
				i := find(t, o, 0, func(op history.Op) bool { return op.Code == "session_expired" })
				late := history.Op{Client: o[i].Client, Kind: history.GetTask, Session: o[i].Session, Invoke: o[i].Return + 1, Return: o[i].Return + 2,
					Code: "no_more_available", AppliedAt: t0 + o[i].Return + int64(time.Hour)}
				return append(o, late)
			}},
		{name: "held task leased to a second session", sessions: true, lin: true, others: []string{"held by sessions"},
			mutate: func(t *testing.T, o []history.Op) []history.Op {
				i := find(t, o, len(o)/2, func(op history.Op) bool { return op.Kind == history.GetTask && op.Code == "" && op.Holder != 0 })
				dup := o[i]
				dup.Client = (dup.Client + 1) % 5
				dup.Session, dup.Holder = dup.Session+1000, dup.Holder+1000
				dup.AppliedAt++
				return append(o, dup)
			}},
		{name: "FinishAndGet drops its finish and answers it accepted", lin: true, others: []string{"finished twice in pass", "dispatched again in pass"},
			sim: func(sc *simConfig) { *sc = finishAndGetSim(*sc); sc.dropFinish = true }},
		{name: "FinishAndGet drops its finish, under sessions", sessions: true, lin: true, others: []string{"finished twice in pass"},
			sim: func(sc *simConfig) { *sc = finishAndGetSim(*sc); sc.dropFinish = true }},
		{name: "FinishAndGet's late finish accepted", lin: true,
			sim: func(sc *simConfig) { *sc = finishAndGetSim(*sc) },
			mutate: func(t *testing.T, o []history.Op) []history.Op {
				i := find(t, o, 0, func(op history.Op) bool {
					if op.Kind != history.FinishAndGet || op.Finish == nil || op.Finish.Code != "stale_epoch" {
						return false
					}
					// A later lease of the task was applied before.
					return slices.ContainsFunc(o, func(g history.Op) bool {
						return (g.Kind == history.GetTask || g.Kind == history.FinishAndGet) && g.Code == "" &&
							g.Task.ID == op.Meta.ID && g.Task.Epoch > op.Meta.Epoch && g.AppliedAt < op.AppliedAt
					})
				})
				o[i].Finish = &history.FinishOutcome{}
				return o
			}},
		{name: "FinishAndGet's answer silent about its finish", lin: true,
			sim: func(sc *simConfig) { *sc = finishAndGetSim(*sc) },
			mutate: func(t *testing.T, o []history.Op) []history.Op {
				i := find(t, o, len(o)/2, func(op history.Op) bool { return op.Kind == history.FinishAndGet && op.Finish != nil })
				o[i].Finish = nil
				return o
			}},
		{name: "allgather data swapped", others: []string{"allgather"},
			mutate: func(t *testing.T, o []history.Op) []history.Op {
				i := find(t, o, 0, func(op history.Op) bool { return op.Kind == history.Watch && op.Code == "" })
				r := slices.Clone(o[i].Result)
				r[0], r[1] = r[1], r[0]
				o[i].Result = r
				return o
			}},
	}
	for _, mu := range mutations {
		t.Run(mu.name, func(t *testing.T) {
			sc := bigSim(7, 0)
			if mu.sessions {
				sc = sessionSim(7, 0)
			}
			if mu.sim != nil {
				mu.sim(&sc)
			}
			o := simulate(sc)
			if mu.mutate != nil {
				o = mu.mutate(t, o)
			}
			cfg := simCheckConfig(t, sc)
			res, err := Linearizable(o, cfg, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if mu.lin && res.Outcome != porcupine.Illegal {
				t.Errorf("Linearizable: %s, want Illegal", res.Outcome)
			}
			if !mu.lin && res.Outcome != porcupine.Ok {
				t.Errorf("Linearizable: %s, want Ok", res.Outcome)
			}
			if mu.lin {
				t.Logf("%s", res.Explanation)
			}
			var text []string
			for _, err := range All(o, cfg) {
				if !strings.HasPrefix(err.Error(), "linearizability:") {
					text = append(text, err.Error())
				}
			}
			all := strings.Join(text, "\n")
			for _, want := range mu.others {
				if !strings.Contains(all, want) {
					t.Errorf("no error contains %q:\n%s", want, all)
				}
			}
			if len(mu.others) == 0 && all != "" {
				t.Logf("other checkers: %s", all)
			}
		})
	}
}

// find returns the index of the first operation from index from on that
// matches.
func find(t *testing.T, o []history.Op, from int, match func(history.Op) bool) int {
	t.Helper()
	for i := from; i < len(o); i++ {
		if match(o[i]) {
			return i
		}
	}
	t.Fatal("the simulated history has no operation to mutate")
	return -1
}

// TestSimulatorFollowsFSM cross-checks the simulator's task queue against
// the expectations the checkers encode, on the aggregate: each pass but
// the last finishes every task exactly once, with TaskFinished or with
// FinishAndGet.
func TestSimulatorFollowsFSM(t *testing.T) {
	for _, sc := range []simConfig{bigSim(11, 0), finishAndGetSim(bigSim(11, 0))} {
		o := simulate(sc)
		finishes := map[[2]int]int{}
		pass := map[fsm.TaskMeta]int{}
		highest := 0
		for _, op := range o {
			if (op.Kind == history.GetTask || op.Kind == history.FinishAndGet) && op.Code == "" {
				pass[op.Task] = op.Pass
				highest = max(highest, op.Pass)
			}
		}
		for _, op := range o {
			if op.Kind == history.TaskFinished && op.Code == "" ||
				op.Kind == history.FinishAndGet && op.Finish != nil && op.Finish.Code == "" {
				finishes[[2]int{op.Meta.ID, pass[op.Meta]}]++
			}
		}
		for p := 0; p < highest; p++ {
			for id := 1; id <= 8; id++ {
				if n := finishes[[2]int{id, p}]; n != 1 {
					t.Fatalf("combined %d: task %d finished %d times in pass %d", sc.combined, id, n, p)
				}
			}
		}
	}
}

// BenchmarkLinearizable measures the linearizability check of a simulated
// 2000-operation history of five clients.
func BenchmarkLinearizable(b *testing.B) {
	sc := bigSim(1, 0.03)
	o := simulate(sc)
	cfg := simCheckConfig(b, sc)
	for b.Loop() {
		if res, err := Linearizable(o, cfg, time.Minute); err != nil || res.Outcome != porcupine.Ok {
			b.Fatal(res.Outcome, err)
		}
	}
}
