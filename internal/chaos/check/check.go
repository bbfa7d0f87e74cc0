package check

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/chaos/history"
	"github.com/raftmaster/raftmaster/rpc"
)

// DefaultTimeout bounds the linearizability check run by All when
// Config.Timeout is zero.
const DefaultTimeout = time.Minute

// maxErrors bounds how many violations one checker lists.
const maxErrors = 50

// Config describes the run that produced a history.
type Config struct {
	// NumTasks is the number of tasks of the dataset; ids are 1..NumTasks.
	NumTasks int
	// TaskTimeout is the dataset's task lease.
	TaskTimeout time.Duration
	// Grace bounds how long (in FSM time) a save-model lease may still deny
	// other trainers after its deadline: the lag of the leader's Tick plus
	// every LeaderGrace extension. A new leader moves the deadline to its
	// own clock plus the fail-over grace, so after a leaderless interval
	// that began near the deadline, or after several fail-overs in a row,
	// the lease can outlive deadline+FailoverGrace; pass a bound that covers
	// the run's faults. Zero or less means unbounded: a denial is then only
	// checked against the holder.
	Grace time.Duration
	// VisualizeDir is where Linearizable writes the visualization of a
	// failure; os.TempDir() when empty.
	VisualizeDir string
	// Timeout bounds the linearizability check that All runs;
	// DefaultTimeout when zero.
	Timeout time.Duration
}

// All runs every checker and returns their violations, nil when the
// history passes. A linearizability check that times out is reported too.
func All(ops []history.Op, cfg Config) []error {
	var errs []error
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	res, err := Linearizable(ops, cfg, timeout)
	if err != nil {
		errs = append(errs, err)
	}
	if err := res.Err(); err != nil {
		errs = append(errs, err)
	}
	kv, err := KVLinearizable(ops, cfg, timeout)
	if err != nil {
		errs = append(errs, err)
	}
	if err := kv.Err(); err != nil {
		errs = append(errs, err)
	}
	for _, f := range []func() error{
		func() error { return PassAccounting(ops, cfg) },
		func() error { return SingleSaveHolder(ops) },
		func() error { return Allgather(ops) },
		func() error { return KVVersionsUnique(ops) },
		func() error { return SessionHolds(ops, cfg) },
		func() error { return SessionEnds(ops) },
	} {
		if err := f(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// unknown reports whether op's outcome is unknown: it never returned, or it
// returned an error that is not an FSM outcome (the command may still have
// been applied, even after the client gave up), or a refusal of the
// de-duplication table, which says nothing of an earlier attempt. A
// session_expired answer is one too: it may refuse a retry, whose earlier
// attempt may have been applied before the session ended (see
// expiredRefusal).
func unknown(op history.Op) bool {
	if op.Unknown() || op.Code == rpc.CodeUnknownOutcome || op.Code == rpc.CodeUnknownClient || op.Code == rpc.CodeTooManyClients ||
		expiredRefusal(op) {
		return true
	}
	if op.Code == "" {
		return false
	}
	_, ok := fsm.ParseCode(op.Code)
	return !ok
}

// succeeded reports whether op is known to have been answered without an
// error code.
func succeeded(op history.Op) bool { return op.Code == "" && !unknown(op) }

// expiredRefusal reports whether op was answered session_expired: its
// session had ended when the cluster refused it. Any earlier attempt was
// applied before the end, which came before the answer, or never.
func expiredRefusal(op history.Op) bool {
	return op.Code == fsm.CodeSessionExpired.String() && !op.Unknown()
}

// appliedUnder reports whether op's answer shows it applied (or replayed)
// under its session: a known outcome with an FSM time. The cluster refuses
// a request of an ended session before it applies or replays anything,
// and gives no FSM time to a refusal, so op's session was open at
// AppliedAt, and at the moment in log order the command was applied.
func appliedUnder(op history.Op) bool {
	return op.Session != 0 && !unknown(op) && op.AppliedAt != 0
}

// describe names operation i for an error message.
func describe(i int, op history.Op) string {
	var b strings.Builder
	fmt.Fprintf(&b, "op %d (client %d, ", i, op.Client)
	if op.Job != "" {
		fmt.Fprintf(&b, "job %q, ", op.Job)
	}
	fmt.Fprintf(&b, "%s", op.Kind)
	if op.Session != 0 {
		fmt.Fprintf(&b, " under session %d", op.Session)
	}
	switch op.Kind {
	case history.GetTask:
		fmt.Fprintf(&b, " pass %d", op.Pass)
	case history.TaskFinished, history.TaskFailed:
		fmt.Fprintf(&b, " task %d epoch %d", op.Meta.ID, op.Meta.Epoch)
	case history.FinishAndGet:
		fmt.Fprintf(&b, " finishing task %d epoch %d, pass %d", op.Meta.ID, op.Meta.Epoch, op.Pass)
	case history.SaveModel:
		fmt.Fprintf(&b, " %q for %v", op.Trainer, op.BlockDur)
	case history.Join, history.Watch, history.Leave:
		fmt.Fprintf(&b, " group %q member %s", op.Group, op.Member)
	case history.KVGet:
		fmt.Fprintf(&b, " %q", op.Key)
	case history.KVCAS:
		fmt.Fprintf(&b, " %q version %d value %q", op.Key, op.Expect, op.Value)
	case history.KVCompareValue:
		fmt.Fprintf(&b, " %q expecting %q value %q", op.Key, op.ExpectValue, op.Value)
	case history.KVDelete:
		fmt.Fprintf(&b, " %q version %d", op.Key, op.Expect)
	case history.KVDeletePrefix:
		fmt.Fprintf(&b, " prefix %q", op.Key)
	case history.KVAdd:
		fmt.Fprintf(&b, " %q amount %d", op.Key, op.Amount)
	case history.KVAppend:
		fmt.Fprintf(&b, " %q value %q", op.Key, op.Value)
	case history.KVMultiSet:
		fmt.Fprintf(&b, " %q = %q", op.Keys, op.Values)
	case history.SessionRefused:
		fmt.Fprintf(&b, " %s", op.Path)
	}
	switch {
	case expiredRefusal(op) && op.Kind == history.SessionRefused:
		b.WriteString(" -> session_expired")
	case expiredRefusal(op):
		b.WriteString(" -> session_expired (an earlier attempt may have applied before the session ended)")
	case unknown(op):
		b.WriteString(" -> unknown outcome")
		if op.Code != "" {
			fmt.Fprintf(&b, " (%s)", op.Code)
		}
	case op.Code != "":
		fmt.Fprintf(&b, " -> %s", op.Code)
	case op.Kind == history.GetTask || op.Kind == history.FinishAndGet:
		fmt.Fprintf(&b, " -> task %d epoch %d", op.Task.ID, op.Task.Epoch)
		if op.Holder != 0 {
			fmt.Fprintf(&b, " held by session %d", op.Holder)
		}
	case op.Kind == history.SaveModel:
		fmt.Fprintf(&b, " -> granted=%v", op.Granted)
	case op.Ignored:
		b.WriteString(" -> ignored")
	case op.Kind == history.Watch:
		fmt.Fprintf(&b, " -> rank %d of %d", op.Rank, len(op.Result))
	case op.Kind == history.KVGet || op.Kind == history.KVCAS || op.Kind == history.KVCompareValue:
		fmt.Fprintf(&b, " -> swapped=%v found=%v %q at version %d", op.Swapped, op.Found, op.Read, op.Version)
	case op.Kind == history.KVDelete:
		fmt.Fprintf(&b, " -> deleted=%v found=%v at version %d", op.Number == 1, op.Found, op.Version)
	case op.Kind == history.KVDeletePrefix:
		fmt.Fprintf(&b, " -> %d deleted", op.Number)
	case op.Kind == history.KVAdd:
		fmt.Fprintf(&b, " -> sum %d at version %d", op.Number, op.Version)
	case op.Kind == history.KVAppend:
		fmt.Fprintf(&b, " -> length %d at version %d", op.Number, op.Version)
	case op.Kind == history.KVMultiSet:
		fmt.Fprintf(&b, " -> versions %v", op.Versions)
	default:
		b.WriteString(" -> ok")
	}
	if op.Kind == history.FinishAndGet && !unknown(op) {
		switch f := op.Finish; {
		case f == nil:
			b.WriteString(", its finish not reported")
		case f.Code != "":
			fmt.Fprintf(&b, ", its finish %s", f.Code)
		case f.Ignored:
			b.WriteString(", its finish ignored")
		default:
			b.WriteString(", its finish accepted")
		}
	}
	if op.AppliedAt != 0 {
		fmt.Fprintf(&b, " applied at %d", op.AppliedAt)
	}
	ret := "never"
	if !op.Unknown() {
		ret = fmt.Sprint(time.Duration(op.Return))
	}
	fmt.Fprintf(&b, ", real time %v..%s)", time.Duration(op.Invoke), ret)
	return b.String()
}

// violations collects a checker's errors, keeping at most maxErrors.
type violations struct {
	name string
	errs []error
	more int
}

func (v *violations) add(format string, args ...any) {
	if len(v.errs) >= maxErrors {
		v.more++
		return
	}
	v.errs = append(v.errs, fmt.Errorf(format, args...))
}

func (v *violations) err() error {
	if len(v.errs) == 0 {
		return nil
	}
	errs := v.errs
	if v.more > 0 {
		errs = append(errs, fmt.Errorf("... and %d more", v.more))
	}
	return fmt.Errorf("%s: %w", v.name, errors.Join(errs...))
}
