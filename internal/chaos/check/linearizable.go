package check

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

// Result is the outcome of Linearizable.
type Result struct {
	// Outcome is porcupine.Ok, porcupine.Illegal, or porcupine.Unknown when
	// the check ran out of time.
	Outcome porcupine.CheckResult
	// Visualization is the path of porcupine's HTML visualization, written
	// when the outcome is Illegal.
	Visualization string
	// Explanation says, when the outcome is Illegal, which partitions have
	// no linearization and why the operations that could come next cannot.
	Explanation string
	// Ops is the number of operations checked, Partitions the number of
	// partitions (tasks and the save-model lease).
	Ops, Partitions int
	// Unattributed is the number of GetTask operations (and lease parts
	// of FinishAndGet operations) left out because they failed or their
	// outcome is unknown.
	Unattributed int
	// Relaxed is set when a GetTask outcome (or a FinishAndGet's lease) was
	// unknown, so a dispatch may skip epochs.
	Relaxed bool
	// Elapsed is how long porcupine took.
	Elapsed time.Duration
}

// Err returns nil when the history is linearizable, and an error that
// explains the violation, or that the check timed out, otherwise.
func (r Result) Err() error {
	return porcupineErr("linearizability", r.Outcome, r.Visualization, r.Explanation, r.Ops, r.Elapsed)
}

// porcupineErr is the error of a porcupine check named check: nil when the
// history is linearizable; the explanation and the visualization's path
// when it is not; a timeout otherwise.
func porcupineErr(check string, outcome porcupine.CheckResult, visualization, explanation string, ops int, elapsed time.Duration) error {
	switch outcome {
	case porcupine.Ok:
		return nil
	case porcupine.Illegal:
		msg := check + ": history is not linearizable"
		if visualization != "" {
			msg += " (visualization: " + visualization + ")"
		}
		return errors.New(msg + "\n" + explanation)
	}
	return fmt.Errorf("%s: check of %d operations timed out after %v: outcome unknown", check, ops, elapsed)
}

// visualize writes porcupine's HTML view of a failed check named check
// into dir (the system's temporary directory when empty) and returns its
// path.
func visualize(pm porcupine.Model, info porcupine.LinearizationInfo, dir, check, pattern string) (string, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", fmt.Errorf("%s: visualization: %w", check, err)
	}
	path := f.Name()
	f.Close()
	if err := porcupine.VisualizePath(pm, info, path); err != nil {
		return "", fmt.Errorf("%s: visualization: %w", check, err)
	}
	return path, nil
}

// Linearizable checks ops for linearizability against the task-lease and
// save-model models described in the package documentation, within
// timeout (0 for none). The error reports a history it cannot check (an
// operation that returns before it is invoked) or a visualization that could
// not be written; the verdict is in the Result.
func Linearizable(ops []history.Op, cfg Config, timeout time.Duration) (Result, error) {
	m := &model{timeout: int64(cfg.TaskTimeout), grace: int64(cfg.Grace), base: math.MaxInt64, alive: aliveTimes(ops)}
	var res Result
	for _, op := range ops {
		if g, ok := getView(op); ok && unknown(g) {
			m.relaxed = true
		}
		if op.AppliedAt != 0 && op.AppliedAt < m.base {
			m.base = op.AppliedAt
		}
	}
	if m.base == math.MaxInt64 {
		m.base = 0
	}
	res.Relaxed = m.relaxed
	var hist []porcupine.Operation
	for i, op := range ops {
		if op.Invoke > op.Return {
			return res, fmt.Errorf("linearizability: %s returns before it is invoked", describe(i, op))
		}
		ins := toModelOps(i, op)
		if _, ok := getView(op); ok && !slices.ContainsFunc(ins, func(in mop) bool { return in.kind == history.GetTask || in.leases() }) {
			res.Unattributed++
		}
		for _, in := range ins {
			ret := op.Return
			if in.res == rUnknown && !expiredRefusal(op) {
				// It may take effect after the client gave up. One whose
				// session had ended took effect before the refusal, if at all.
				ret = history.Never
			}
			hist = append(hist, porcupine.Operation{
				ClientId: max(op.Client, 0), Input: in, Call: op.Invoke, Return: ret,
			})
		}
	}
	res.Ops = len(hist)
	parts := partition(hist)
	res.Partitions = len(parts)
	pm := m.porcupineModel()
	start := time.Now()
	outcome, info := porcupine.CheckOperationsVerbose(pm, hist, timeout)
	res.Elapsed = time.Since(start)
	res.Outcome = outcome
	if outcome != porcupine.Illegal {
		return res, nil
	}
	res.Explanation = m.explain(parts, info)
	if timeout > 0 && res.Elapsed >= timeout {
		res.Explanation = "(the check also reached its timeout: a partition listed may only have been cut short)\n" + res.Explanation
	}
	path, err := visualize(pm, info, cfg.VisualizeDir, "linearizability", "raftmaster-linearizability-*.html")
	res.Visualization = path
	return res, err
}

// status is a task's queue in the model.
type status uint8

const (
	todo status = iota
	pending
	done
)

func (s status) String() string { return [...]string{"todo", "pending", "done"}[s] }

// answer is what an operation returned, as the model sees it; for a
// FinishAndGet, what its finish did.
type answer uint8

const (
	rOK         answer = iota // dispatched, finish/failure accepted, save granted
	rStale                    // finish refused with stale_epoch
	rIgnored                  // failure ignored
	rDenied                   // save-model lease denied
	rUnknown                  // outcome unknown
	rUnexpected               // an answer the specification never gives
)

// mop is a model operation: the porcupine input.
type mop struct {
	idx     int // index in the history
	kind    history.Kind
	save    bool // the save-model partition, else the task partition id
	id      int
	epoch   int // GetTask and a FinishAndGet's lease: the leased epoch; finish and fail: the reported one
	pass    int
	res     answer // a FinishAndGet's: its finish's
	why     string // rUnexpected: what was wrong
	t       int64  // AppliedAt, 0 when not reported
	trainer string
	dur     int64
	// holder is the session a GetTask leased the task to, 0 for a lease
	// with a deadline.
	holder uint64
	// part is, for a FinishAndGet, what of it the operation checks in
	// task id's partition: its finish (of epoch finEpoch), its lease, or
	// both when it finished and leased the same task.
	part     part
	finEpoch int
}

// part is the parts of a FinishAndGet one model operation holds.
type part uint8

const (
	finishPart part = 1 << iota
	leasePart
)

// finishes reports whether in is a FinishAndGet's finish, leases whether
// it is its lease (each or both).
func (in mop) finishes() bool { return in.part&finishPart != 0 }
func (in mop) leases() bool   { return in.part&leasePart != 0 }

// toModelOps converts op into the model operations that check it, none
// when the model leaves it out. A FinishAndGet is one operation when it
// finished and leased the same task, else its finish in the finished
// task's partition and its lease in the leased task's, each as a
// TaskFinished and a GetTask would be (a part the answer does not show
// applied left out). Both parts of one call have the same real-time
// interval and FSM time, so each partition orders them as one entry; the
// partitions are checked each on its own, as for every operation.
func toModelOps(i int, op history.Op) []mop {
	if op.Kind != history.FinishAndGet {
		if in, ok := toModelOp(i, op); ok {
			return []mop{in}
		}
		return nil
	}
	var out []mop
	if f, ok := finishView(op); ok {
		in, _ := toModelOp(i, f)
		in.kind, in.part, in.finEpoch = history.FinishAndGet, finishPart, in.epoch
		out = append(out, in)
	} else if !unknown(op) && leaseAfterFinish(op.Code) {
		// Known, and answered after the finish was applied, yet silent
		// about it.
		out = append(out, mop{idx: i, kind: history.FinishAndGet, t: op.AppliedAt, id: op.Meta.ID, part: finishPart,
			finEpoch: op.Meta.Epoch, res: rUnexpected, why: "the answer says nothing of the finish the call carried, which was applied before the lease"})
	}
	if g, ok := getView(op); ok {
		if in, ok := toModelOp(i, g); ok {
			in.kind, in.part = history.FinishAndGet, leasePart
			if len(out) == 1 && out[0].id == in.id {
				in.part, in.finEpoch, in.res, in.why = finishPart|leasePart, out[0].finEpoch, out[0].res, out[0].why
				return []mop{in}
			}
			out = append(out, in)
		}
	}
	return out
}

// toModelOp converts op, or reports that the model leaves it out.
func toModelOp(i int, op history.Op) (mop, bool) {
	in := mop{idx: i, kind: op.Kind, t: op.AppliedAt}
	unk := unknown(op)
	if unk {
		in.res, in.t = rUnknown, 0
	}
	switch op.Kind {
	case history.GetTask:
		if unk || op.Code != "" || op.Task.ID == 0 {
			return in, false
		}
		in.id, in.epoch, in.pass, in.holder = op.Task.ID, op.Task.Epoch, op.Pass, op.Holder
	case history.TaskFinished, history.TaskFailed:
		in.id, in.epoch = op.Meta.ID, op.Meta.Epoch
		if unk {
			break
		}
		stale := fsm.CodeStaleEpoch.String()
		switch {
		case op.Kind == history.TaskFinished && op.Code == "" && !op.Ignored:
			in.res = rOK
		case op.Kind == history.TaskFinished && op.Code == stale:
			in.res = rStale
		case op.Kind == history.TaskFinished && op.Code == "":
			in.res, in.why = rUnexpected, "a strict dataset never ignores a finish (it refuses a stale one with stale_epoch)"
		case op.Kind == history.TaskFailed && op.Code == "" && !op.Ignored:
			in.res = rOK
		case op.Kind == history.TaskFailed && op.Code == "":
			in.res = rIgnored
		default:
			in.res, in.why = rUnexpected, "unexpected answer "+op.Code
		}
	case history.SaveModel:
		in.save, in.trainer, in.dur = true, op.Trainer, int64(op.BlockDur)
		switch {
		case unk:
		case op.Code != "":
			in.res, in.why = rUnexpected, "unexpected answer "+op.Code
		case op.Granted:
			in.res = rOK
		default:
			in.res = rDenied
		}
	default:
		return in, false
	}
	return in, true
}

type partKey struct {
	save bool
	id   int
}

// partition splits a history into one partition per task id, in id order,
// and the save-model partition last. It is deterministic, so that the
// explanation sees the partitions porcupine checked.
func partition(hist []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[partKey][]porcupine.Operation{}
	var keys []partKey
	for _, op := range hist {
		in := op.Input.(mop)
		k := partKey{in.save, in.id}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], op)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].save != keys[j].save {
			return !keys[i].save
		}
		return keys[i].id < keys[j].id
	})
	parts := make([][]porcupine.Operation, len(keys))
	for i, k := range keys {
		parts[i] = byKey[k]
	}
	return parts
}

// taskState is the model of one task.
type taskState struct {
	epoch    int
	status   status
	pass     int
	deadline int64 // a lower bound of the lease's real deadline
	clock    int64
}

// saveState is the model of the save-model lease.
type saveState struct {
	holder string
	lo, hi int64 // bounds of the natural deadline (before any extension)
	// lazy is set after a grant whose time is unknown: hi is then fixed
	// by the next operation with a time, t+lazyDur, since the grant was
	// applied before it.
	lazy    bool
	lazyDur int64
	clock   int64
}

// model holds the parameters of the sequential specification. Its states
// are nil (a partition's initial state), taskState or saveState.
type model struct {
	timeout int64
	grace   int64
	relaxed bool
	base    int64 // the smallest AppliedAt, for descriptions
	// alive is, per session, the latest FSM time at which the history
	// shows it open (aliveTimes).
	alive map[uint64]int64
}

func (m *model) porcupineModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partition,
		Init:      func() []any { return []any{nil} },
		Step: func(state, input, _ any) []any {
			next, _ := m.step(state, input.(mop))
			return next
		},
		Hash:              hashState,
		DescribeOperation: func(input, _ any) string { return m.describeOp(input.(mop)) },
		DescribeState:     m.describeState,
	}
	return nm.ToModel()
}

// step returns the states that can follow s after in, or none and why.
func (m *model) step(s any, in mop) ([]any, string) {
	if in.res == rUnexpected {
		return nil, in.why
	}
	if in.save {
		ss, _ := s.(saveState)
		return m.stepSave(ss, in)
	}
	ts, _ := s.(taskState)
	return m.stepTask(ts, in)
}

func (m *model) stepTask(s taskState, in mop) ([]any, string) {
	if in.kind == history.FinishAndGet {
		return m.stepFinishAndGet(s, in)
	}
	hasT := in.t != 0
	if hasT && in.t < s.clock {
		return nil, fmt.Sprintf("applied at %s, before FSM time %s that an earlier operation reached", m.at(in.t), m.at(s.clock))
	}
	next := s
	if hasT {
		next.clock = in.t
	}
	current := s.status == pending && s.epoch == in.epoch
	expired := !hasT || in.t >= s.deadline // the lease may have expired by then
	switch in.kind {
	case history.GetTask:
		if in.epoch != s.epoch+1 && !(m.relaxed && in.epoch > s.epoch) {
			if m.relaxed {
				return nil, fmt.Sprintf("dispatched epoch %d after epoch %d: epochs must grow", in.epoch, s.epoch)
			}
			return nil, fmt.Sprintf("dispatched epoch %d after epoch %d: the next epoch must be %d", in.epoch, s.epoch, s.epoch+1)
		}
		switch s.status {
		case todo:
			if in.pass != s.pass {
				return nil, fmt.Sprintf("dispatched in pass %d, but the task waits in pass %d", in.pass, s.pass)
			}
		case pending:
			if in.pass != s.pass {
				return nil, fmt.Sprintf("dispatched in pass %d while leased in pass %d", in.pass, s.pass)
			}
			if !expired {
				return nil, fmt.Sprintf("dispatched again at %s, before the lease of epoch %d expired (deadline %s)", m.at(in.t), s.epoch, m.at(s.deadline))
			}
		case done:
			if in.pass <= s.pass {
				return nil, fmt.Sprintf("dispatched in pass %d, but it was already done in pass %d", in.pass, s.pass)
			}
		}
		next.status, next.epoch, next.pass = pending, in.epoch, in.pass
		from := in.t
		if !hasT {
			from = s.clock
			if s.status == pending {
				from = max(from, s.deadline)
			}
		}
		next.deadline = from + m.timeout
		if in.holder != 0 {
			// Held by a session: it has no deadline, but goes back when
			// the session ends, which may be right after the last FSM
			// time the history shows it open, or when the leader revokes
			// it for lack of progress, no sooner than the task timeout.
			next.deadline = min(next.deadline, max(m.alive[in.holder], from))
		}
		return []any{next}, ""
	case history.TaskFinished:
		switch in.res {
		case rOK:
			if !current {
				return nil, fmt.Sprintf("finish of epoch %d accepted, but the task is %s", in.epoch, m.describeTask(s))
			}
			next.status = done
		case rStale:
			if current {
				if !expired {
					return nil, fmt.Sprintf("finish of the current lease refused as stale at %s, before its deadline %s", m.at(in.t), m.at(s.deadline))
				}
				next.status = todo // the lease had expired
			}
		case rUnknown:
			if current {
				next.status = done
				return []any{s, next}, ""
			}
			return []any{s}, ""
		}
		return []any{next}, ""
	case history.TaskFailed:
		switch in.res {
		case rOK:
			if !current {
				return nil, fmt.Sprintf("failure of epoch %d accepted, but the task is %s", in.epoch, m.describeTask(s))
			}
			next.status = todo
		case rIgnored:
			if current {
				if !expired {
					return nil, fmt.Sprintf("failure of the current lease ignored at %s, before its deadline %s", m.at(in.t), m.at(s.deadline))
				}
				next.status = todo
			}
		case rUnknown:
			if current {
				next.status = todo
				return []any{s, next}, ""
			}
			return []any{s}, ""
		}
		return []any{next}, ""
	}
	return nil, "unexpected operation " + string(in.kind)
}

// stepFinishAndGet steps a FinishAndGet's parts in this partition: the
// finish as a TaskFinished, then the lease as a GetTask, from every state
// the finish may leave.
func (m *model) stepFinishAndGet(s taskState, in mop) ([]any, string) {
	states := []any{s}
	if in.finishes() {
		f := in
		f.kind, f.epoch = history.TaskFinished, in.finEpoch
		next, why := m.stepTask(s, f)
		if why != "" {
			return nil, "its finish: " + why
		}
		states = next
	}
	if !in.leases() {
		return states, ""
	}
	g := in
	g.kind, g.res = history.GetTask, rOK
	var out []any
	var whys []string
	for _, st := range states {
		next, why := m.stepTask(st.(taskState), g)
		out = append(out, next...)
		if why != "" && !slices.Contains(whys, why) {
			whys = append(whys, why)
		}
	}
	if len(out) == 0 {
		prefix := "its lease: "
		if in.finishes() {
			prefix = "its lease, after its finish: "
		}
		return nil, prefix + strings.Join(whys, "; or ")
	}
	return dedupStates(out), ""
}

func (m *model) stepSave(s saveState, in mop) ([]any, string) {
	if in.res == rUnknown {
		// Denied, or granted at an unknown time t >= clock (and, if another
		// trainer held the lease, t >= its deadline).
		g := s
		from := s.clock
		if s.holder != "" && s.holder != in.trainer {
			from = max(from, s.lo)
		}
		g.holder, g.lo, g.hi = in.trainer, from+in.dur, math.MaxInt64
		g.lazy, g.lazyDur = true, in.dur
		return []any{s, g}, ""
	}
	hasT := in.t != 0
	next := s
	if hasT {
		if in.t < s.clock {
			return nil, fmt.Sprintf("applied at %s, before FSM time %s that an earlier operation reached", m.at(in.t), m.at(s.clock))
		}
		next.clock = in.t
		if s.lazy {
			next.hi, next.lazy = in.t+s.lazyDur, false
		}
	}
	other := s.holder != "" && s.holder != in.trainer
	switch in.res {
	case rOK:
		if other && hasT && in.t < s.lo {
			return nil, fmt.Sprintf("granted to %q at %s while %q holds the lease until %s", in.trainer, m.at(in.t), s.holder, m.at(s.lo))
		}
		next.holder = in.trainer
		if hasT {
			next.lo, next.hi = in.t+in.dur, in.t+in.dur
		} else {
			from := s.clock
			if other {
				from = max(from, s.lo)
			}
			next.lo, next.hi = from+in.dur, math.MaxInt64
			next.lazy, next.lazyDur = true, in.dur
		}
	case rDenied:
		if !other {
			if s.holder == "" {
				return nil, fmt.Sprintf("denied to %q, but nobody holds the lease", in.trainer)
			}
			return nil, fmt.Sprintf("denied to %q, who holds the lease", in.trainer)
		}
		if m.grace > 0 && hasT && next.hi < math.MaxInt64-m.grace && in.t >= next.hi+m.grace {
			return nil, fmt.Sprintf("denied to %q at %s, but %q's lease ended at %s, more than the grace %v before", in.trainer, m.at(in.t), s.holder, m.at(next.hi), time.Duration(m.grace))
		}
	}
	return []any{next}, ""
}

// hashState hashes a state consistently with ==.
func hashState(s any) uint64 {
	var h uint64 = 14695981039346656037 // FNV-1a
	mix := func(v int64) {
		for range 8 {
			h ^= uint64(v) & 0xff
			h *= 1099511628211
			v >>= 8
		}
	}
	switch s := s.(type) {
	case taskState:
		mix(1)
		mix(int64(s.epoch))
		mix(int64(s.status))
		mix(int64(s.pass))
		mix(s.deadline)
		mix(s.clock)
	case saveState:
		mix(2)
		for i := 0; i < len(s.holder); i++ {
			mix(int64(s.holder[i]))
		}
		mix(s.lo)
		mix(s.hi)
		if s.lazy {
			mix(s.lazyDur + 1)
		}
		mix(s.clock)
	}
	return h
}

// at formats an FSM time relative to the earliest AppliedAt of the history.
func (m *model) at(t int64) string {
	if t == 0 {
		return "an unknown time"
	}
	if t == math.MaxInt64 {
		return "an unknown later time"
	}
	d := time.Duration(t - m.base)
	if d < 0 {
		return "T" + d.String()
	}
	return "T+" + d.String()
}

func (m *model) describeTask(s taskState) string {
	switch s.status {
	case pending:
		return fmt.Sprintf("pending epoch %d pass %d until %s", s.epoch, s.pass, m.at(s.deadline))
	case done:
		return fmt.Sprintf("done in pass %d (epoch %d)", s.pass, s.epoch)
	}
	return fmt.Sprintf("todo in pass %d (epoch %d)", s.pass, s.epoch)
}

func (m *model) describeState(s any) string {
	switch s := s.(type) {
	case taskState:
		return m.describeTask(s) + ", clock " + m.at(s.clock)
	case saveState:
		if s.holder == "" {
			return "no holder, clock " + m.at(s.clock)
		}
		return fmt.Sprintf("%q holds until %s..%s, clock %s", s.holder, m.at(s.lo), m.at(s.hi), m.at(s.clock))
	}
	return "initial"
}

func (m *model) describeOp(in mop) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d ", in.idx)
	switch in.kind {
	case history.GetTask:
		fmt.Fprintf(&b, "get_task(pass %d) -> task %d epoch %d", in.pass, in.id, in.epoch)
		if in.holder != 0 {
			fmt.Fprintf(&b, " held by session %d", in.holder)
		}
	case history.TaskFinished, history.TaskFailed:
		fmt.Fprintf(&b, "%s(task %d epoch %d) -> ", in.kind, in.id, in.epoch)
		b.WriteString([...]string{"accepted", "stale_epoch", "ignored", "", "unknown", in.why}[in.res])
	case history.FinishAndGet:
		b.WriteString("finish_and_get(")
		if in.finishes() {
			fmt.Fprintf(&b, "finish task %d epoch %d -> %s", in.id, in.finEpoch,
				[...]string{"accepted", "stale_epoch", "ignored", "", "unknown", in.why}[in.res])
		} else {
			b.WriteString("its finish in another partition, or none")
		}
		b.WriteString("; ")
		if in.leases() {
			fmt.Fprintf(&b, "get pass %d -> task %d epoch %d", in.pass, in.id, in.epoch)
			if in.holder != 0 {
				fmt.Fprintf(&b, " held by session %d", in.holder)
			}
		} else {
			b.WriteString("its lease in another partition, or none")
		}
		b.WriteString(")")
	case history.SaveModel:
		fmt.Fprintf(&b, "save_model(%q, %v) -> ", in.trainer, time.Duration(in.dur))
		b.WriteString([...]string{"granted", "", "", "denied", "unknown", in.why}[in.res])
	}
	if in.t != 0 {
		b.WriteString(" at " + m.at(in.t))
	}
	return b.String()
}

// explain describes each partition that has no linearization: its longest
// linearizable prefix, the states it ends in, and why each operation that
// could come next cannot.
func (m *model) explain(parts [][]porcupine.Operation, info porcupine.LinearizationInfo) string {
	partials := info.PartialLinearizations()
	var b strings.Builder
	for p, part := range parts {
		var longest []int
		if p < len(partials) {
			for _, l := range partials[p] {
				if len(l) > len(longest) || len(l) == len(longest) && slices.Compare(l, longest) < 0 {
					longest = l
				}
			}
		}
		if len(longest) == len(part) {
			continue
		}
		name := "save-model lease"
		if in := part[0].Input.(mop); !in.save {
			name = fmt.Sprintf("task %d", in.id)
		}
		states := []any{nil}
		inPrefix := make([]bool, len(part))
		for _, id := range longest {
			inPrefix[id] = true
			var next []any
			for _, s := range states {
				ns, _ := m.step(s, part[id].Input.(mop))
				next = append(next, ns...)
			}
			states = dedupStates(next)
		}
		var desc []string
		for _, s := range states {
			desc = append(desc, m.describeState(s))
		}
		fmt.Fprintf(&b, "%s: no linearization of its %d operations; the longest linearizable prefix has %d, ending in {%s}; none of the operations that could come next can:\n",
			name, len(part), len(longest), strings.Join(desc, " | "))
		// The operations that could come next are those invoked before
		// every remaining operation returned.
		minRet := int64(math.MaxInt64)
		for i, op := range part {
			if !inPrefix[i] {
				minRet = min(minRet, op.Return)
			}
		}
		for i, op := range part {
			if inPrefix[i] || op.Call > minRet {
				continue
			}
			in := op.Input.(mop)
			var whys []string
			for _, s := range states {
				if _, why := m.step(s, in); why != "" && !slices.Contains(whys, why) {
					whys = append(whys, why)
				}
			}
			if len(whys) == 0 {
				whys = append(whys, "legal here, but no order that takes it next can be completed")
			}
			fmt.Fprintf(&b, "  %s (client %d, real time %v..%s): %s\n", m.describeOp(in), op.ClientId,
				time.Duration(op.Call), realTime(op.Return), strings.Join(whys, "; or "))
		}
	}
	return b.String()
}

func realTime(t int64) string {
	if t == history.Never {
		return "never"
	}
	return time.Duration(t).String()
}

func dedupStates(states []any) []any {
	var out []any
	for _, s := range states {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
