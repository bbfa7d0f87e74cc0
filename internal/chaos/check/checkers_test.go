package check

import (
	"strings"
	"testing"

	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

type errCase struct {
	name string
	ops  []history.Op
	// want lists strings the error must contain; none means no error.
	want []string
}

func runErrCases(t *testing.T, check func([]history.Op) error, cases []errCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := check(tc.ops)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected violation: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("violation not caught")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error lacks %q:\n%v", s, err)
				}
			}
			t.Logf("%v", err)
		})
	}
}

// twoTasks is a clean history of two tasks over pass 0 and the start of
// pass 1.
func twoTasks() []history.Op {
	return ops(
		get(0, 0, 1, 0, 1, 1, 0),
		get(1, 0, 1, 0, 2, 1, 0),
		fin(0, 2, 3, 1, 1, 2),
		fin(1, 2, 3, 2, 1, 3),
		get(0, 4, 5, 1, 1, 2, 4),
	)
}

func TestPassAccounting(t *testing.T) {
	cfg := testCfg
	cfg.NumTasks = 2
	runErrCases(t, func(o []history.Op) error { return PassAccounting(o, cfg) }, []errCase{
		{name: "clean", ops: twoTasks()},
		{name: "current pass may be unfinished", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
		)},
		{name: "expired lease finished under the next epoch", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			get(1, 150, 151, 0, 1, 2, 150),
			stale(0, 160, 161, 1, 1, 160),
			fin(1, 170, 171, 1, 2, 170),
			get(0, 172, 173, 0, 2, 1, 172),
			fin(0, 174, 175, 2, 1, 174),
			getErr(0, 176, 177, 0, "pass_before", 176),
		)},
		{name: "unknown finish accounts for its pass", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			get(1, 0, 1, 0, 2, 1, 0),
			finUnknown(0, 2, 1, 1),
			fin(1, 2, 3, 2, 1, 3),
			get(0, 4, 5, 1, 2, 2, 4),
		)},
		{name: "retry answered twice is one command", ops: append(twoTasks(),
			fin(0, 2, 3, 1, 1, 2),
			get(1, 0, 1, 0, 2, 1, 0),
		)},
		{name: "task lost", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			get(1, 0, 1, 0, 2, 1, 0),
			fin(0, 2, 3, 1, 1, 2),
			get(0, 4, 5, 1, 1, 2, 4),
		), want: []string{"task 2 lost in pass 0", "dispatched in it by ops [1]", "pass 1 began (op 3)", "pass 1 began: op 3 (client 0, get_task pass 1"}},
		{name: "task never dispatched is lost", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			fin(0, 2, 3, 1, 1, 2),
			getErr(0, 4, 5, 1, "no_more_available", 4),
		), want: []string{"task 2 lost in pass 0", "dispatched in it by ops []"}},
		{name: "pass_before proves the pass ended", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			fin(0, 2, 3, 1, 1, 2),
			getErr(1, 4, 5, 0, "pass_before", 4),
		), want: []string{"task 2 lost in pass 0"}},
		{name: "unknown finish of a later pass does not count", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			get(1, 0, 1, 0, 2, 1, 0),
			fin(1, 2, 3, 2, 1, 3),
			get(0, 4, 5, 1, 1, 2, 4),
			finUnknown(0, 6, 1, 2),
			get(1, 8, 9, 2, 2, 3, 8),
		), want: []string{"task 1 lost in pass 0"}},
		{name: "finished twice in a pass", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			get(1, 150, 151, 0, 1, 2, 150),
			fin(0, 160, 161, 1, 1, 160),
			fin(1, 170, 171, 1, 2, 170),
		), want: []string{"task 1 finished twice in pass 0", "op 2 ", "op 3 "}},
		{name: "dispatched again after its finish returned", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			fin(0, 2, 3, 1, 1, 2),
			get(1, 4, 5, 0, 1, 2, 1), // stamped early: only real time catches it
		), want: []string{"task 1 dispatched again in pass 0 by op 2", "invoked after its finish op 1"}},
		{name: "dispatched again after its finish applied", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			fin(0, 2, 10, 1, 1, 2),
			get(1, 3, 4, 0, 1, 2, 3), // concurrent in real time
		), want: []string{"task 1 dispatched again in pass 0 by op 2", "applied after its finish op 1"}},
		{name: "finish of a lease nobody was given", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			fin(0, 2, 3, 1, 2, 2),
		), want: []string{"op 1 (client 0, task_finished task 1 epoch 2", "accepted for a lease that no GetTask dispatched"}},
		{name: "lease dispatched twice", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			get(1, 0, 1, 0, 1, 1, 1),
		), want: []string{"task 1 epoch 1 dispatched twice: op 0", "and op 1"}},
		{name: "task id out of range", ops: ops(
			get(0, 0, 1, 0, 3, 1, 0),
		), want: []string{"task id 3 is not in 1..2"}},
		{name: "answered without a task", ops: ops(
			get(0, 0, 1, 0, 0, 0, 0),
		), want: []string{"answered without a task"}},
	})
}

func TestSingleSaveHolder(t *testing.T) {
	runErrCases(t, SingleSaveHolder, []errCase{
		{name: "clean", ops: ops(
			save(0, 0, 1, "a", 100, true, 0),
			save(1, 2, 3, "b", 100, false, 50),
			save(0, 4, 5, "a", 100, true, 60), // renewal
			save(1, 170, 171, "b", 10, true, 160),
			save(0, 172, 173, "a", 10, true, 170), // b's lease ended at 170
			saveUnknown(1, 174, "b", 100),
			save(0, 175, 176, "a", 10, false, 175),
		)},
		{name: "zero duration holds nothing", ops: ops(
			save(0, 0, 1, "a", 0, true, 5),
			save(1, 2, 3, "b", 100, true, 5),
		)},
		{name: "granted to two trainers", ops: ops(
			save(0, 0, 1, "a", 100, true, 0),
			save(1, 2, 3, "b", 100, true, 99),
		), want: []string{`op 1 (client 1, save_model "b" for 100ms -> granted=true`, `while "a" held the lease`, "1ms later", "by op 0"}},
		{name: "order is by FSM time, not by the history", ops: ops(
			save(1, 2, 3, "b", 100, true, 50),
			save(0, 0, 1, "a", 100, true, 0),
		), want: []string{`op 0 `, `while "a" held the lease`}},
		{name: "a renewal extends the lease", ops: ops(
			save(0, 0, 1, "a", 100, true, 0),
			save(0, 2, 3, "a", 100, true, 90),
			save(1, 4, 5, "b", 100, true, 150),
		), want: []string{`while "a" held the lease`}},
		{name: "a renewal answered on a retry as not granted still shortened the lease", ops: ops(
			save(0, 0, 1, "a", 300, true, 0),
			// applied at 100 for 50 ms (the lease then ends at 150); its
			// answer was lost, and the retry, after b's grant, says no
			save(0, 2, 300, "a", 50, false, 100),
			save(1, 4, 5, "b", 100, true, 200),
		)},
		{name: "a request of unknown outcome may have shortened the lease", ops: ops(
			save(0, 0, 1, "a", 300, true, 0),
			saveUnknown(0, 2, "a", 10),
			save(1, 4, 5, "b", 100, true, 200),
		)},
		{name: "a request of unknown outcome sent after the grant excuses nothing", ops: ops(
			save(0, 0, 1, "a", 300, true, 0),
			save(1, 4, 5, "b", 100, true, 200),
			saveUnknown(0, 6, "a", 10),
		), want: []string{`while "a" held the lease`}},
	})
}

func TestAllgather(t *testing.T) {
	runErrCases(t, Allgather, []errCase{
		{name: "clean", ops: ops(
			join(0, 0, 1, "g", 1, 3, "x"),
			join(1, 0, 1, "g", 2, 3, "y"),
			join(2, 0, 1, "g", 3, 3, "z"),
			watch(0, 1, 5, "g", 1, 0, "x", "y", "z"),
			watch(1, 1, 5, "g", 2, 1, "x", "y", "z"),
			watch(2, 1, 5, "g", 3, 2, "x", "y", "z"),
			join(0, 6, 7, "h", 1, 1, "solo"),
			watch(0, 7, 8, "h", 1, 0, "solo"),
		)},
		{name: "re-join replaces the data", ops: ops(
			join(0, 0, 1, "g", 1, 2, "old"),
			join(0, 2, 3, "g", 1, 2, "new"),
			join(1, 4, 5, "g", 2, 2, "y"),
			func() history.Op { w := watch(0, 1, 3, "g", 1, 0); w.Code = "reconnected"; return w }(),
			watch(0, 3, 6, "g", 1, 0, "new", "y"),
			watch(1, 5, 6, "g", 2, 1, "new", "y"),
		)},
		{name: "unknown join may be the one", ops: ops(
			join(0, 0, 1, "g", 1, 2, "old"),
			func() history.Op { j := join(0, 2, 3, "g", 1, 2, "new"); j.Return = history.Never; return j }(),
			join(1, 4, 5, "g", 2, 2, "y"),
			watch(0, 3, 6, "g", 1, 0, "new", "y"),
		)},
		{name: "failed watches are not compared", ops: ops(
			join(0, 0, 1, "g", 1, 2, "x"),
			func() history.Op { w := watch(0, 1, 9, "g", 1, 0); w.Code = "allgather_timeout"; return w }(),
		)},
		{name: "members saw different data", ops: ops(
			join(0, 0, 1, "g", 1, 2, "x"),
			join(1, 0, 1, "g", 2, 2, "y"),
			watch(0, 1, 5, "g", 1, 0, "x", "y"),
			watch(1, 1, 5, "g", 2, 1, "x", "z"),
		), want: []string{`group "g"`, `saw ["x" "y"]`, `saw ["x" "z"]`, `"z", is the data of no join`}},
		{name: "entry at the rank is not the member's data", ops: ops(
			join(0, 0, 1, "g", 1, 2, "x"),
			join(1, 0, 1, "g", 2, 2, "y"),
			watch(0, 1, 5, "g", 1, 1, "x", "y"),
		), want: []string{`entry 1 is "y", not the member's joined data`, `op 0 `, `with data "x"`}},
		{name: "re-join after completion gets the completed result", ops: ops(
			join(0, 0, 1, "g", 1, 2, "x"),
			join(1, 0, 1, "g", 2, 2, "y"),
			join(0, 2, 3, "g", 1, 2, "x2"),
			watch(0, 1, 2, "g", 1, 0, "x", "y"),
			watch(0, 3, 4, "g", 1, 0, "x", "y"),
			watch(1, 1, 2, "g", 2, 1, "x", "y"),
		)},
		{name: "data of a join invoked after completion", ops: ops(
			join(0, 0, 1, "g", 1, 2, "x"),
			join(1, 0, 1, "g", 2, 2, "y"),
			watch(1, 1, 5, "g", 2, 1, "x", "y"),
			join(0, 6, 7, "g", 1, 2, "z"),
			watch(0, 7, 8, "g", 1, 0, "z", "y"),
		), want: []string{`entry 0 is "z", not the member's joined data (op 0 `, `saw ["x" "y"]`}},
		{name: "wrong number of entries", ops: ops(
			join(0, 0, 1, "g", 1, 3, "x"),
			join(1, 0, 1, "g", 2, 3, "y"),
			watch(0, 1, 5, "g", 1, 0, "x", "y"),
		), want: []string{"2 entries, but the member joined for 3 peers"}},
		{name: "two members with one rank", ops: ops(
			join(0, 0, 1, "g", 1, 2, "x"),
			join(1, 0, 1, "g", 2, 2, "x"),
			watch(0, 1, 5, "g", 1, 0, "x", "x"),
			watch(1, 1, 5, "g", 2, 0, "x", "x"),
		), want: []string{"both have rank 0"}},
		{name: "rank out of range", ops: ops(
			join(0, 0, 1, "g", 1, 1, "x"),
			watch(0, 1, 5, "g", 1, 1, "x"),
		), want: []string{"rank 1 out of range for 1 entries"}},
		{name: "watch without a join", ops: ops(
			join(0, 0, 1, "g", 1, 1, "x"),
			watch(1, 1, 5, "g", 2, 0, "x"),
		), want: []string{"the member has no join invoked before the group completed"}},
		{name: "a failed join does not count", ops: ops(
			func() history.Op { j := join(0, 0, 1, "g", 1, 1, "x"); j.Code = "group_mismatch"; return j }(),
			watch(0, 1, 5, "g", 1, 0, "x"),
		), want: []string{"the member has no join invoked before the group completed"}},
	})
}

func TestAll(t *testing.T) {
	cfg := testCfg
	cfg.NumTasks = 2
	cfg.VisualizeDir = t.TempDir()
	if errs := All(append(twoTasks(), save(0, 0, 1, "a", 10, true, 0)), cfg); len(errs) != 0 {
		t.Fatalf("clean history: %v", errs)
	}
	bad := ops(
		get(0, 0, 1, 0, 1, 1, 0),
		get(1, 2, 3, 0, 1, 2, 50), // double dispatch
		fin(1, 4, 5, 1, 2, 60),
		get(0, 6, 7, 1, 2, 1, 70), // pass 1 began: task 1 done, task 2 lost
		save(0, 0, 1, "a", 100, true, 0),
		save(1, 2, 3, "b", 100, true, 50),
		join(0, 0, 1, "g", 1, 1, "x"),
		watch(0, 1, 2, "g", 1, 0, "y"),
	)
	errs := All(bad, cfg)
	var text []string
	for _, err := range errs {
		text = append(text, err.Error())
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{"linearizability:", "pass accounting:", "single save holder:", "allgather:"} {
		if !strings.Contains(all, want) {
			t.Errorf("All missed %q:\n%s", want, all)
		}
	}
}
