package check

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

type linCase struct {
	name string
	ops  []history.Op
	cfg  *Config // testCfg when nil
	// want is the expected outcome; for Illegal, every string in explain
	// must be in the explanation.
	want    porcupine.CheckResult
	explain []string
}

func runLinCases(t *testing.T, cases []linCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testCfg
			if tc.cfg != nil {
				cfg = *tc.cfg
			}
			cfg.VisualizeDir = t.TempDir()
			res, err := Linearizable(tc.ops, cfg, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tc.want {
				t.Fatalf("outcome %s, want %s\n%s", res.Outcome, tc.want, res.Explanation)
			}
			if tc.want == porcupine.Ok {
				if err := res.Err(); err != nil {
					t.Fatalf("Err() = %v for a linearizable history", err)
				}
				return
			}
			if res.Err() == nil {
				t.Fatal("Err() = nil for an illegal history")
			}
			for _, s := range tc.explain {
				if !strings.Contains(res.Explanation, s) {
					t.Errorf("explanation lacks %q:\n%s", s, res.Explanation)
				}
			}
			if fi, err := os.Stat(res.Visualization); err != nil || fi.Size() == 0 {
				t.Errorf("visualization %q: %v", res.Visualization, err)
			}
			t.Logf("%s", res.Err())
		})
	}
}

func TestLinearizableTaskLegal(t *testing.T) {
	runLinCases(t, []linCase{
		{name: "empty", want: porcupine.Ok},
		{name: "dispatch and finish", want: porcupine.Ok, ops: ops(
			get(0, 0, 2, 0, 1, 1, 1),
			get(1, 0, 2, 0, 2, 1, 1),
			fin(0, 3, 4, 1, 1, 3),
			fin(1, 3, 5, 2, 1, 4),
		)},
		{name: "expired lease dispatched again, late finish refused", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			get(1, 150, 151, 0, 1, 2, 150),
			stale(0, 160, 161, 1, 1, 160),
			fin(1, 170, 171, 1, 2, 170),
		)},
		{name: "lease expired without redispatch: stale then todo", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			stale(0, 120, 121, 1, 1, 120),
			get(1, 130, 131, 0, 1, 2, 130),
		)},
		{name: "finish accepted after the deadline (lease extended or tick late)", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			fin(0, 300, 301, 1, 1, 300),
		)},
		{name: "failure requeues at once", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			failed(0, 10, 11, 1, 1, false, 10),
			get(1, 20, 21, 0, 1, 2, 20),
			failed(0, 22, 23, 1, 1, true, 22),
			fin(1, 30, 31, 1, 2, 30),
		)},
		{name: "ignored failure of the current lease after its deadline", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			failed(0, 120, 121, 1, 1, true, 120),
			get(1, 130, 131, 0, 1, 2, 130),
		)},
		{name: "next pass", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			fin(0, 2, 3, 1, 1, 2),
			get(0, 4, 5, 1, 1, 2, 4),
			fin(0, 6, 7, 1, 2, 6),
			get(0, 8, 9, 2, 1, 3, 8),
		)},
		{name: "stale finish of an older epoch is always legal", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			fin(0, 2, 3, 1, 1, 2),
			stale(1, 4, 5, 1, 1, 4),
			stale(1, 6, 7, 1, 7, 6),
		)},
		{name: "concurrent operations in either real-time order", want: porcupine.Ok, ops: ops(
			// Invoked in the opposite order of their epochs, but concurrent.
			get(1, 0, 10, 0, 1, 2, 150),
			get(0, 1, 9, 0, 1, 1, 0),
		)},
		{name: "equal AppliedAt (a leader whose clock is behind)", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 5),
			fin(0, 2, 3, 1, 1, 5),
			get(0, 4, 5, 1, 1, 2, 5),
		)},
		{name: "operations without AppliedAt skip the FSM-time rules", want: porcupine.Ok, ops: func() []history.Op {
			o := ops(
				get(0, 0, 1, 0, 1, 1, 0),
				stale(0, 2, 3, 1, 1, 0),
				get(1, 4, 5, 0, 1, 2, 0),
			)
			for i := range o {
				o[i].AppliedAt = 0
			}
			return o
		}()},
		{name: "transient error code is an unknown outcome", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finCode(0, 2, 3, 1, 1, "not_leader", 0),
			// The finish applied after all, while the client gave up.
			get(0, 4, 5, 1, 1, 2, 4),
		)},
	})
}

func TestLinearizableUnknownOutcomes(t *testing.T) {
	runLinCases(t, []linCase{
		{name: "unknown finish took effect", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finUnknown(0, 2, 1, 1),
			get(1, 5, 6, 1, 1, 2, 5), // pass 1: the task was done
		)},
		{name: "unknown finish did not take effect", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finUnknown(0, 2, 1, 1),
			get(1, 150, 151, 0, 1, 2, 150), // pass 0: the lease expired
		)},
		{name: "unknown finish cannot excuse an early redispatch", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finUnknown(0, 2, 1, 1),
			get(1, 50, 51, 0, 1, 2, 50),
		), explain: []string{"task 1", "before the lease of epoch 1 expired"}},
		{name: "unknown failure took effect", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			failedUnknown(0, 2, 1, 1),
			get(1, 10, 11, 0, 1, 2, 10),
		)},
		{name: "unknown failure did not take effect", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			failedUnknown(0, 2, 1, 1),
			fin(0, 10, 11, 1, 1, 10),
		)},
		{name: "unknown GetTask relaxes the epoch rule", want: porcupine.Ok, ops: ops(
			getUnknown(2, 0, 0),
			// Epoch 1 went to the unknown GetTask and expired.
			get(0, 150, 151, 0, 1, 2, 150),
			fin(0, 152, 153, 1, 2, 152),
		)},
		{name: "unknown GetTask does not allow a going-back epoch", want: porcupine.Illegal, ops: ops(
			getUnknown(2, 0, 0),
			get(0, 10, 11, 0, 1, 3, 10),
			fin(0, 12, 13, 1, 3, 12),
			get(1, 20, 21, 1, 1, 2, 20),
		), explain: []string{"dispatched epoch 2 after epoch 3: epochs must grow"}},
	})
}

func TestLinearizableTaskViolations(t *testing.T) {
	runLinCases(t, []linCase{
		{name: "double dispatch in a pass", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			get(1, 2, 3, 0, 1, 2, 50),
		), explain: []string{"task 1", "#1 get_task(pass 0) -> task 1 epoch 2", "before the lease of epoch 1 expired"}},
		{name: "two clients leased the same epoch", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			get(1, 0, 1, 0, 1, 1, 150),
		), explain: []string{"dispatched epoch 1 after epoch 1: the next epoch must be 2"}},
		{name: "epoch skip", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			fin(0, 2, 3, 1, 1, 2),
			get(0, 4, 5, 1, 1, 3, 4),
		), explain: []string{"dispatched epoch 3 after epoch 1: the next epoch must be 2"}},
		{name: "finish accepted for a stale epoch", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			get(1, 150, 151, 0, 1, 2, 150),
			fin(0, 160, 161, 1, 1, 160),
		), explain: []string{"finish of epoch 1 accepted, but the task is pending epoch 2"}},
		{name: "finish accepted twice", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			fin(0, 2, 3, 1, 1, 2),
			fin(1, 4, 5, 1, 1, 4),
		), explain: []string{"but the task is done in pass 0"}},
		{name: "current lease refused as stale before its deadline", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			stale(0, 50, 51, 1, 1, 50),
		), explain: []string{"refused as stale at T+50ms, before its deadline T+100ms"}},
		{name: "failure of a stale epoch accepted", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			get(1, 150, 151, 0, 1, 2, 150),
			failed(0, 160, 161, 1, 1, false, 160),
		), explain: []string{"failure of epoch 1 accepted"}},
		{name: "failure of the current lease ignored before its deadline", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			failed(0, 10, 11, 1, 1, true, 10),
		), explain: []string{"failure of the current lease ignored"}},
		{name: "dispatched again in the pass it was done", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			fin(0, 2, 3, 1, 1, 2),
			get(1, 200, 201, 0, 1, 2, 200),
		), explain: []string{"dispatched in pass 0, but it was already done in pass 0"}},
		{name: "dispatched in a pass that cannot have begun", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 1, 2, 1, 0),
		), explain: []string{"task 2", "dispatched in pass 1, but the task waits in pass 0"}},
		{name: "real-time order contradicts the epochs", want: porcupine.Illegal, ops: ops(
			// Epoch 2 returned before epoch 1 was invoked.
			get(0, 0, 10, 0, 1, 2, 150),
			get(1, 20, 30, 0, 1, 1, 0),
		), explain: []string{"task 1"}},
		{name: "FSM time contradicts the order", want: porcupine.Illegal, ops: ops(
			// Concurrent in real time, but the finish is stamped before
			// the dispatch it finishes (FSM times print relative to the
			// earliest AppliedAt).
			get(0, 0, 10, 0, 1, 1, 100),
			fin(1, 0, 10, 1, 1, 50),
		), explain: []string{"applied at T+0s, before FSM time T+50ms"}},
		{name: "ignored finish on a strict dataset", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			func() history.Op { o := fin(0, 2, 3, 1, 1, 2); o.Ignored = true; return o }(),
		), explain: []string{"strict dataset never ignores a finish"}},
		{name: "unexpected code", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finCode(0, 2, 3, 1, 1, "unknown_task", 2),
		), explain: []string{"unexpected answer unknown_task"}},
	})
}

func TestLinearizableSave(t *testing.T) {
	unbounded := testCfg
	unbounded.Grace = 0
	runLinCases(t, []linCase{
		{name: "grant, deny, renew, expire, grant", want: porcupine.Ok, ops: ops(
			save(0, 0, 1, "a", 100, true, 0),
			save(1, 2, 3, "b", 100, false, 50),
			save(0, 4, 5, "a", 100, true, 60),
			save(1, 6, 7, "b", 100, false, 150),
			save(1, 170, 171, "b", 10, true, 170),
		)},
		{name: "denied within the grace after the deadline", want: porcupine.Ok, ops: ops(
			save(0, 0, 1, "a", 100, true, 0),
			save(1, 2, 3, "b", 100, false, 140),
		)},
		{name: "unknown grant took effect", want: porcupine.Ok, ops: ops(
			saveUnknown(0, 0, "a", 100),
			save(1, 2, 3, "b", 100, false, 10),
		)},
		{name: "unknown grant did not take effect", want: porcupine.Ok, ops: ops(
			saveUnknown(0, 0, "a", 100),
			save(1, 2, 3, "b", 100, true, 10),
		)},
		{name: "unknown grant after a known one", want: porcupine.Ok, ops: ops(
			save(0, 0, 1, "a", 100, true, 0),
			saveUnknown(1, 2, "b", 100),
			// b's request applied after a's lease ended at 100, at most
			// at 200 (when c is applied), so b held it until at most 300:
			save(2, 200, 201, "c", 100, false, 200),
			save(2, 340, 341, "c", 100, false, 340),
		)},
		{name: "denial long after the deadline, grace unbounded", cfg: &unbounded, want: porcupine.Ok, ops: ops(
			save(0, 0, 1, "a", 100, true, 0),
			save(1, 2, 3, "b", 100, false, 10_000),
		)},
		{name: "granted to two trainers", want: porcupine.Illegal, ops: ops(
			save(0, 0, 1, "a", 100, true, 0),
			save(1, 2, 3, "b", 100, true, 50),
		), explain: []string{"save-model lease", `granted to "b" at T+50ms while "a" holds the lease until T+100ms`}},
		{name: "denied to the holder", want: porcupine.Illegal, ops: ops(
			save(0, 0, 1, "a", 100, true, 0),
			save(0, 2, 3, "a", 100, false, 50),
		), explain: []string{`denied to "a", who holds the lease`}},
		{name: "denied with no holder", want: porcupine.Illegal, ops: ops(
			save(0, 0, 1, "a", 100, false, 0),
		), explain: []string{"nobody holds the lease"}},
		{name: "denied after deadline plus grace", want: porcupine.Illegal, ops: ops(
			save(0, 0, 1, "a", 100, true, 0),
			save(1, 2, 3, "b", 100, false, 160),
		), explain: []string{"more than the grace 50ms before"}},
		{name: "unknown grant cannot explain a denial that precedes it", want: porcupine.Illegal, ops: ops(
			save(1, 0, 1, "b", 100, false, 0),
			saveUnknown(0, 2, "a", 100),
		), explain: []string{"nobody holds the lease"}},
	})
}

func TestLinearizableMalformed(t *testing.T) {
	bad := get(0, 5, 1, 0, 1, 1, 0)
	if _, err := Linearizable(ops(bad), testCfg, 0); err == nil {
		t.Fatal("an operation that returns before its invoke was accepted")
	}
}

// TestLinearizableTimeout builds a history whose refutation needs an
// exponential search, so the check must time out, and checks that a timeout
// is Unknown and an error, not a pass.
func TestLinearizableTimeout(t *testing.T) {
	o := ops(get(0, 0, 1, 0, 1, 1, 0))
	for c := 1; c <= 40; c++ {
		o = append(o, finUnknown(c, 2, 1, 7)) // never current: no effect, any order
	}
	o = append(o, finCode(41, 100, 101, 1, 1, "unknown_task", 100))
	cfg := testCfg
	cfg.VisualizeDir = t.TempDir()
	res, err := Linearizable(o, cfg, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != porcupine.Unknown {
		t.Fatalf("outcome %s, want Unknown", res.Outcome)
	}
	if err := res.Err(); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("Err() = %v, want a timeout", err)
	}
	if res.Visualization != "" {
		t.Fatalf("visualization written for a timeout: %s", res.Visualization)
	}
}

func TestLinearizableResultCounts(t *testing.T) {
	res, err := Linearizable(ops(
		get(0, 0, 1, 0, 1, 1, 0),
		getErr(1, 0, 1, 0, "no_more_available", 0),
		getUnknown(2, 0, 0),
		save(0, 2, 3, "a", 10, true, 2),
		join(0, 2, 3, "g", 1, 1, "x"),
	), testCfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != porcupine.Ok || res.Ops != 2 || res.Partitions != 2 || res.Unattributed != 2 || !res.Relaxed {
		t.Fatalf("%+v", res)
	}
}
