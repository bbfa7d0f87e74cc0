package check

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

// simConfig shapes a simulated run.
type simConfig struct {
	seed        uint64
	clients     int
	ops         int // task and save-model operations to record
	tasks       int
	timeout     time.Duration
	unknownRate float64 // share of operations whose answer is lost
	graceEvery  int     // a LeaderGrace (and a leader clock change) every n commands; 0 never
	grace       time.Duration
	tickLag     time.Duration
	groups      int // allgather groups of three members
	// sessions: the trainers lease tasks under sessions of ttl (their
	// save-model calls go without). A trainer stalls after one lease in
	// stallEvery (0: never) for two to three TTLs, and its session ends a
	// TTL after its last call.
	sessions   bool
	ttl        time.Duration
	stallEvery int
	// combined: the first combined clients report a finish on their
	// next GetTask (history.FinishAndGet) rather than by TaskFinished.
	combined int
	// dropFinish makes the FSM a broken one: a FinishAndGet leases the
	// next task but drops the finish it carried, and answers it accepted.
	dropFinish bool
}

// simTask and simFSM follow fsm's task queue (strict dataset, failureMax
// never reached) and save-model lease, so that the histories they produce
// are ones the specification allows.
type simTask struct {
	epoch    int
	status   status
	deadline int64  // a held task's: when the leader revokes it
	holder   uint64 // the session holding it, 0 for a lease
}

type simFSM struct {
	clock    int64
	pass     int
	timeout  int64
	tasks    []simTask // task id i+1
	todo     []int     // ids, FIFO
	holder   string
	deadline int64 // of the save-model lease
	sessions map[uint64]bool
	lastID   uint64
}

func (f *simFSM) openSession() uint64 {
	f.lastID++
	f.sessions[f.lastID] = true
	return f.lastID
}

// endSession ends session id: the tasks it holds go back to todo.
func (f *simFSM) endSession(id uint64) {
	if !f.sessions[id] {
		return
	}
	delete(f.sessions, id)
	for i := range f.tasks {
		if t := &f.tasks[i]; t.status == pending && t.holder == id {
			t.status = todo
			f.todo = append(f.todo, i+1)
		}
	}
}

func (f *simFSM) advance(now int64) { f.clock = max(f.clock, now) }

// tick expires what was due lag ago: the leader's deadline ticker.
func (f *simFSM) tick(lag int64) {
	expired := false
	for i := range f.tasks {
		if t := &f.tasks[i]; t.status == pending && t.deadline <= f.clock-lag {
			t.status = todo
			f.todo = append(f.todo, i+1)
			expired = true
		}
	}
	if f.holder != "" && f.deadline <= f.clock-lag {
		f.holder = ""
	}
	if expired {
		f.maybeNextPass()
	}
}

func (f *simFSM) leaderGrace(g int64) {
	limit := f.clock + g
	for i := range f.tasks {
		if t := &f.tasks[i]; t.status == pending && t.deadline < limit {
			t.deadline = limit
		}
	}
	if f.holder != "" && f.deadline < limit {
		f.deadline = limit
	}
}

func (f *simFSM) maybeNextPass() {
	if len(f.todo) > 0 {
		return
	}
	for _, t := range f.tasks {
		if t.status != done {
			return
		}
	}
	f.pass++
	for i := range f.tasks {
		f.tasks[i].status = todo
		f.todo = append(f.todo, i+1)
	}
}

func (f *simFSM) getTask(pass int, session uint64) (fsm.TaskMeta, string) {
	switch {
	case pass < f.pass:
		return fsm.TaskMeta{}, "pass_before"
	case pass > f.pass:
		return fsm.TaskMeta{}, "pass_after"
	case len(f.todo) == 0:
		return fsm.TaskMeta{}, "no_more_available"
	}
	id := f.todo[0]
	f.todo = f.todo[1:]
	t := &f.tasks[id-1]
	t.epoch++
	t.status = pending
	t.deadline = f.clock + f.timeout
	t.holder = session
	return fsm.TaskMeta{ID: id, Epoch: t.epoch}, ""
}

func (f *simFSM) finish(m fsm.TaskMeta) string {
	t := &f.tasks[m.ID-1]
	if t.status != pending || t.epoch != m.Epoch {
		return "stale_epoch"
	}
	t.status = done
	f.maybeNextPass()
	return ""
}

func (f *simFSM) fail(m fsm.TaskMeta) (ignored bool) {
	t := &f.tasks[m.ID-1]
	if t.status != pending || t.epoch != m.Epoch {
		return true
	}
	t.status = todo
	f.todo = append(f.todo, m.ID)
	return false
}

func (f *simFSM) requestSave(trainer string, d int64) bool {
	if f.holder != "" && f.holder != trainer && f.deadline > f.clock {
		return false
	}
	f.holder, f.deadline = trainer, f.clock+d
	return true
}

// simClient is one sequential trainer.
type simClient struct {
	id       int
	pass     int
	task     fsm.TaskMeta // held lease, ID 0 when none
	next     int64        // when it invokes its next operation
	inflight *flight
	session  uint64 // its session, 0 when it has none open
}

// expiry is the end of a session whose trainer stalled.
type expiry struct {
	at      int64
	session uint64
}

// flight is an operation between its invoke and its return.
type flight struct {
	op       history.Op
	applyAt  int64 // real time the command is applied
	applied  bool
	willLose bool // the answer is lost: the outcome is unknown
	noApply  bool // ... and the command never applied
}

// simulate runs cfg.clients trainers against a simFSM and returns their
// history. Each command is applied at a random point of its operation's
// interval, in real-time order, with the leader's clock (real time plus a
// skew that changes with each LeaderGrace, from t0) as its Now.
func simulate(cfg simConfig) []history.Op {
	rng := rand.New(rand.NewPCG(cfg.seed, 0x5eed))
	uniform := func(lo, hi time.Duration) int64 { return int64(lo) + rng.Int64N(int64(hi-lo)+1) }
	f := &simFSM{timeout: int64(cfg.timeout), tasks: make([]simTask, cfg.tasks), sessions: map[uint64]bool{}}
	var expiries []expiry
	for i := range f.tasks {
		f.todo = append(f.todo, i+1)
	}
	var skew int64
	applies := 0
	clients := make([]*simClient, cfg.clients)
	for i := range clients {
		clients[i] = &simClient{id: i, next: uniform(0, time.Millisecond)}
	}
	var out []history.Op
	invoked := 0
	for {
		// The next event: an apply or a return of an operation in
		// flight, or an invoke.
		var c *simClient
		var when int64
		for _, cl := range clients {
			var t int64
			switch {
			case cl.inflight != nil && !cl.inflight.applied && !cl.inflight.noApply:
				t = cl.inflight.applyAt
			case cl.inflight != nil:
				t = cl.inflight.op.Return
			case invoked < cfg.ops:
				t = cl.next
			default:
				continue
			}
			if c == nil || t < when {
				c, when = cl, t
			}
		}
		if c == nil {
			break
		}
		if len(expiries) > 0 && expiries[0].at <= when {
			// The leader ends a session that missed its keep-alives.
			e := expiries[0]
			expiries = expiries[1:]
			f.advance(t0 + e.at + skew)
			f.endSession(e.session)
			continue
		}
		fl := c.inflight
		switch {
		case fl == nil: // invoke
			invoked++
			op := history.Op{Client: c.id, Invoke: when}
			switch {
			case c.task.ID != 0 && rng.IntN(10) == 0:
				op.Kind, op.Meta = history.TaskFailed, c.task
			case c.task.ID != 0 && c.id < cfg.combined:
				op.Kind, op.Meta, op.Pass = history.FinishAndGet, c.task, c.pass
			case c.task.ID != 0:
				op.Kind, op.Meta = history.TaskFinished, c.task
			case rng.IntN(20) == 0:
				op.Kind, op.Trainer = history.SaveModel, fmt.Sprintf("trainer-%d", c.id)
				op.BlockDur = time.Duration(uniform(time.Millisecond, 8*time.Millisecond))
			default:
				op.Kind, op.Pass = history.GetTask, c.pass
			}
			if cfg.sessions && op.Kind != history.SaveModel {
				if c.session == 0 {
					// The client opens a session at its first call.
					f.advance(t0 + when + skew)
					c.session = f.openSession()
					out = append(out, history.Op{Client: c.id, Kind: history.OpenSession, Invoke: when, Return: when,
						Session: c.session, AppliedAt: f.clock})
				}
				op.Session = c.session
			}
			applyAt := when + uniform(200*time.Microsecond, 2*time.Millisecond)
			op.Return = applyAt + uniform(100*time.Microsecond, 2*time.Millisecond)
			fl = &flight{op: op, applyAt: applyAt}
			if rng.Float64() < cfg.unknownRate {
				fl.willLose = true
				fl.noApply = rng.IntN(2) == 0
			}
			c.inflight = fl
		case !fl.applied && !fl.noApply: // apply
			fl.applied = true
			applies++
			if cfg.graceEvery > 0 && applies%cfg.graceEvery == 0 {
				// A new leader, with its own clock, proposes its grace.
				skew = uniform(-2*time.Millisecond, 2*time.Millisecond)
				f.advance(t0 + when + skew)
				f.leaderGrace(int64(cfg.grace))
			}
			f.advance(t0 + when + skew)
			f.tick(int64(cfg.tickLag))
			op := &fl.op
			if op.Session != 0 && !f.sessions[op.Session] {
				// Refused before anything is applied, without a time.
				op.Code = "session_expired"
				break
			}
			switch op.Kind {
			case history.GetTask:
				op.Task, op.Code = f.getTask(op.Pass, op.Session)
				if op.Code == "" {
					op.Holder = op.Session
				}
			case history.FinishAndGet:
				// The finish, then the lease, in one entry; the answer
				// says how the finish went, an error answer too.
				op.Finish = &history.FinishOutcome{}
				if !cfg.dropFinish {
					op.Finish.Code = f.finish(op.Meta)
				}
				op.Task, op.Code = f.getTask(op.Pass, op.Session)
				if op.Code == "" {
					op.Holder = op.Session
				}
			case history.TaskFinished:
				op.Code = f.finish(op.Meta)
			case history.TaskFailed:
				op.Ignored = f.fail(op.Meta)
			case history.SaveModel:
				op.Granted = f.requestSave(op.Trainer, int64(op.BlockDur))
			}
			op.AppliedAt = f.clock
		default: // return
			op := fl.op
			c.inflight = nil
			c.next = op.Return + uniform(100*time.Microsecond, time.Millisecond)
			if fl.willLose {
				out = append(out, history.Op{Client: op.Client, Kind: op.Kind, Invoke: op.Invoke, Return: history.Never,
					Pass: op.Pass, Meta: op.Meta, Trainer: op.Trainer, BlockDur: op.BlockDur, Session: op.Session})
				c.task = fsm.TaskMeta{}
				continue
			}
			out = append(out, op)
			if op.Code == "session_expired" {
				// The next call opens a new session.
				c.session, c.task = 0, fsm.TaskMeta{}
				continue
			}
			switch op.Kind {
			case history.GetTask, history.FinishAndGet:
				c.task = fsm.TaskMeta{} // a FinishAndGet reported it
				switch op.Code {
				case "":
					c.task = op.Task
					// Work; now and then for longer than the lease.
					work := uniform(500*time.Microsecond, 5*time.Millisecond)
					if rng.IntN(8) == 0 {
						work = uniform(cfg.timeout*8/10, cfg.timeout*3/2)
					}
					if c.session != 0 && cfg.stallEvery > 0 && rng.IntN(cfg.stallEvery) == 0 {
						// The trainer stalls: no call, no keep-alive. Its
						// session ends a TTL (and a tick) later.
						work = uniform(2*cfg.ttl, 3*cfg.ttl)
						end := op.Return + int64(cfg.ttl) + uniform(0, time.Millisecond)
						expiries = append(expiries, expiry{end, c.session})
						slices.SortFunc(expiries, func(a, b expiry) int { return int(a.at - b.at) })
						out = append(out, history.Op{Client: c.id, Kind: history.Stall, Invoke: op.Return, Return: op.Return + work,
							Session: c.session, Data: "pause"})
					}
					c.next += work
				case "pass_before":
					c.pass++
				case "no_more_available":
					c.next += uniform(500*time.Microsecond, 3*time.Millisecond)
				}
			case history.TaskFinished, history.TaskFailed:
				c.task = fsm.TaskMeta{}
			}
		}
	}
	return append(out, simAllgather(rng, cfg.groups, len(clients))...)
}

// simAllgather produces the joins and watches of groups of three members,
// some of which join twice before the group completes.
func simAllgather(rng *rand.Rand, groups, firstClient int) []history.Op {
	var out []history.Op
	base := int64(time.Hour)
	for g := range groups {
		name := fmt.Sprintf("group-%d", g)
		var data []string
		var joins []history.Op
		for m := range 3 {
			inv := base + int64(g)*int64(time.Second) + int64(m)*int64(time.Millisecond)
			j := history.Op{Client: firstClient + m, Kind: history.Join, Invoke: inv, Return: inv + int64(time.Microsecond),
				Group: name, Member: member(m), NumPeers: 3, Data: fmt.Sprintf("%s/%d/a", name, m)}
			if rng.IntN(4) == 0 {
				// Re-join with new data; the first watch is told so.
				out = append(out, j, history.Op{Client: j.Client, Kind: history.Watch, Invoke: j.Return,
					Return: j.Return + 10, Group: name, Member: j.Member, Code: "reconnected"})
				j.Invoke, j.Return = j.Return+20, j.Return+30
				j.Data = fmt.Sprintf("%s/%d/b", name, m)
			}
			joins = append(joins, j)
			data = append(data, j.Data)
		}
		done := joins[2].Return + int64(time.Microsecond)
		for m, j := range joins {
			out = append(out, j, history.Op{Client: j.Client, Kind: history.Watch, Invoke: j.Return, Return: done,
				Group: name, Member: j.Member, Rank: m, Result: slices.Clone(data)})
		}
	}
	return out
}
