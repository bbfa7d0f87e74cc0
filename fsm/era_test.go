package fsm

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// nextEra returns a harness on a new FSM restored, as raftmaster restore
// restores one, from the snapshot of h's FSM in the next era, at h's
// clock and index.
func nextEra(t *testing.T, h *harness) *harness {
	t.Helper()
	var b bytes.Buffer
	if err := NextEra(&b, bytes.NewReader(h.f.SnapshotBytes())); err != nil {
		t.Fatal(err)
	}
	n := &harness{t: t, f: restored(t, b.Bytes()), index: h.index, now: h.now}
	t.Cleanup(func() { checkRoundTrip(t, n.f) })
	return n
}

// TestNextEraRefusesOldTokens: after a backup, the old cluster goes on
// handing out register versions, generations, epochs and job numbers; the
// cluster restored from the backup hands out none of them, and refuses
// each old token when a client presents it.
func TestNextEraRefusesOldTokens(t *testing.T) {
	old := newHarness(t) // a Protocol1 cluster: the era moves it to Protocol2
	old.setDataset(2, withParams(func(p *DatasetParams) { p.TaskTimeout = time.Hour }))
	old.ok(&KVCompareAndSet{Key: "k", Version: 0, Value: []byte("v0")})
	leased := old.getTask(0) // a lease held across the backup
	restoredState := nextEra(t, old)
	if v := snapshotVersionOf(t, restoredState.f); v != 5 || restoredState.f.Protocol() != Protocol2 || restoredState.f.Era() != 1 {
		t.Fatalf("restored state: snapshot version %d, level %d, era %d; want 5, %d, 1", v, restoredState.f.Protocol(), restoredState.f.Era(), Protocol2)
	}

	// The old cluster after the backup.
	oldSwap := old.ok(&KVCompareAndSet{Key: "k", Version: 1, Value: []byte("old")}).KV.Version
	oldTask := old.getTask(0)
	oldGen := old.ok(&Join{Group: "g", Member: memberID(1), NumPeers: 2}).Generation
	old.ok(&CreateJob{Header: Header{Job: "old-job"}})
	oldJob, _ := old.f.Job("old-job")

	// The restored cluster does the same.
	n := restoredState
	swap := n.ok(&KVCompareAndSet{Key: "k", Version: 1, Value: []byte("new")})
	task := n.getTask(0)
	gen := n.ok(&Join{Group: "g", Member: memberID(2), NumPeers: 2}).Generation
	n.ok(&CreateJob{Header: Header{Job: "new-job"}})
	newJob, _ := n.f.Job("new-job")
	floor := uint64(1) << EraShift
	switch {
	case swap.KV.Version <= floor || swap.KV.Version == oldSwap:
		t.Fatalf("restored version %d, old %d, want above %d", swap.KV.Version, oldSwap, floor)
	case gen <= floor || gen == oldGen:
		t.Fatalf("restored generation %d, old %d, want above %d", gen, oldGen, floor)
	case newJob.Number <= floor || newJob.Number == oldJob.Number:
		t.Fatalf("restored job number %d, old %d, want above %d", newJob.Number, oldJob.Number, floor)
	case task.Epoch>>32 != 1 || task == oldTask:
		t.Fatalf("restored lease %+v, old %+v, want the era in the epoch", task, oldTask)
	}

	// Old tokens are refused.
	r := n.ok(&KVCompareAndSet{Key: "k", Version: oldSwap, Value: []byte("over")})
	if r.Swapped || !r.Ignored || r.KV.Version != swap.KV.Version {
		t.Fatalf("a compare-and-set with the old cluster's version %d: %+v, want not swapped", oldSwap, r)
	}
	for _, m := range []TaskMeta{oldTask, leased} {
		n.fails(&RenewLease{Meta: m}, ErrStaleEpoch)
		n.fails(&TaskFinished{Meta: m}, ErrStaleEpoch)
		n.ignored(&TaskFailed{Meta: m})
	}
	n.wantTask(task.ID, "pending", task.Epoch, 0)
	if w := n.f.Watch(DefaultJob, "g", memberID(1), oldGen); w.Status != WatchClosed {
		t.Fatalf("a watch of the old cluster's generation %d: %+v, want closed", oldGen, w)
	}
	n.ok(&Join{Group: "g", Member: memberID(1), NumPeers: 2}) // member 1 comes back here
	if w := n.f.Watch(DefaultJob, "g", memberID(1), oldGen); w.Status != WatchReconnected {
		t.Fatalf("a watch of the old cluster's generation %d: %+v, want reconnected", oldGen, w)
	}
	// The new era's own tokens work.
	n.ok(&RenewLease{Meta: task})
	n.ok(&TaskFinished{Meta: task})
}

// TestNextEraAgain: every restore moves to the next era, the counters never
// move back, and the last era refuses another restore, writing nothing.
func TestNextEraAgain(t *testing.T) {
	h := newHarness(t)
	h.ok(&KVCompareAndSet{Key: "k", Version: 0, Value: []byte("v")})
	second := nextEra(t, nextEra(t, h))
	if second.f.Era() != 2 {
		t.Fatalf("era %d after two restores", second.f.Era())
	}
	if v := second.ok(&KVCompareAndSet{Key: "k", Version: 1, Value: []byte("w")}).KV.Version; v != 2<<EraShift+1 {
		t.Fatalf("version %d in era 2, want %d", v, 2<<EraShift+1)
	}

	last := New()
	last.s.era = MaxEra
	last.s.protocol = Protocol2
	var out bytes.Buffer
	if err := NextEra(&out, bytes.NewReader(last.SnapshotBytes())); err == nil || !strings.Contains(err.Error(), "cannot be restored again") || out.Len() != 0 {
		t.Fatalf("NextEra of the last era: %v, %d bytes written", err, out.Len())
	}
	if err := NextEra(&out, strings.NewReader("not a snapshot")); err == nil || out.Len() != 0 {
		t.Fatalf("NextEra of garbage: %v, %d bytes written", err, out.Len())
	}
}

// TestEpochsOfProtocol1: below Protocol2 an epoch past math.MaxInt32 is
// refused as invalid, as before eras; from Protocol2 it is stale.
func TestEpochsOfProtocol1(t *testing.T) {
	h := newHarness(t)
	h.setDataset(1, defaultParams)
	m := h.getTask(0)
	big := TaskMeta{ID: m.ID, Epoch: 1<<32 | m.Epoch}
	for _, c := range []Command{&TaskFinished{Meta: big}, &TaskFailed{Meta: big}, &RenewLease{Meta: big}} {
		h.rejects(c)
	}
	h.protocol2()
	h.fails(&TaskFinished{Meta: big}, ErrStaleEpoch)
	h.fails(&RenewLease{Meta: big}, ErrStaleEpoch)
	h.ignored(&TaskFailed{Meta: big})
	h.rejects(&TaskFinished{Meta: TaskMeta{ID: m.ID, Epoch: MaxEpoch + 1}})
	h.finish(m)
}

// counters returns the register version, generation and job number
// counters of f.
func counters(f *FSM) [3]uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return [3]uint64{f.s.kvVersion, f.s.nextGen, f.s.jobSeq}
}

// lease names one lease of a task of a job.
type lease struct {
	job string
	TaskMeta
}

// TestPropertyNewEraHandsOutNewTokens: a state snapshotted at a random
// point goes on in two clusters, the one it was taken from and one restored
// from it in the next era, fed the same log, whose commands name the old
// cluster's tokens. No register version, generation, job number or task
// lease that the restored cluster hands out is one the old cluster handed
// out after the snapshot, and the restored cluster refuses every old token:
// no compare-and-set naming a version the old cluster gave after the
// snapshot swaps, no task report under an epoch of the old era counts,
// and no watch of a generation the old cluster gave after the snapshot
// answers anything but closed or reconnected.
func TestPropertyNewEraHandsOutNewTokens(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := newPropGen()
		for range rapid.IntRange(propMaxSteps/8, propMaxSteps/2).Draw(t, "before") {
			g.step(t)
		}
		at := counters(g.f)
		var b bytes.Buffer
		if err := NextEra(&b, bytes.NewReader(g.f.SnapshotBytes())); err != nil {
			t.Fatalf("NextEra: %v", err)
		}
		newCluster := restored(t, b.Bytes())

		// given collects what a step handed out: the counters' new values
		// by kind, and new leases.
		given := func(before, after [3]uint64, r *Result, job string, into map[[2]uint64]bool, leases map[lease]bool) {
			for k := range before {
				for v := before[k] + 1; v <= after[k]; v++ {
					into[[2]uint64{uint64(k), v}] = true
				}
			}
			if r.Task != nil && !r.Duplicate {
				leases[lease{jobName(job), r.Task.Meta}] = true
			}
		}
		oldTokens, oldLeases := map[[2]uint64]bool{}, map[lease]bool{}
		type join struct {
			job, group string
			c          *Join
			gen        uint64
		}
		var oldJoins []join
		var log [][]byte
		for range rapid.IntRange(propMaxSteps/8, propMaxSteps/2).Draw(t, "after") {
			before := counters(g.f)
			e, r := g.step(t)
			log = append(log, e)
			c, _ := Decode(e)
			job := ""
			if c != nil {
				job = c.Hdr().Job
			}
			given(before, counters(g.f), r, job, oldTokens, oldLeases)
			if j, ok := c.(*Join); ok && r.Generation > at[1] {
				oldJoins = append(oldJoins, join{jobName(job), j.Group, j, r.Generation})
			}
		}
		for i, e := range log {
			before := counters(newCluster)
			r := newCluster.ApplyEntry(uint64(i+1), e)
			newTokens, newLeases := map[[2]uint64]bool{}, map[lease]bool{}
			c, _ := Decode(e)
			job := ""
			if c != nil {
				job = c.Hdr().Job
			}
			given(before, counters(newCluster), r, job, newTokens, newLeases)
			for tok := range newTokens {
				if oldTokens[tok] {
					t.Fatalf("entry %d: the restored cluster handed out %v, as the old one did after the snapshot", i+1, tok)
				}
			}
			for l := range newLeases {
				if oldLeases[l] {
					t.Fatalf("entry %d: the restored cluster leased %+v, as the old one did after the snapshot", i+1, l)
				}
			}
			switch c := c.(type) {
			case *KVCompareAndSet:
				if r.Swapped && !r.Duplicate && c.Version > at[0] && c.Version < 1<<EraShift {
					t.Fatalf("entry %d: a compare-and-set naming the old cluster's version %d swapped", i+1, c.Version)
				}
			case *RenewLease:
				if len(c.More) == 0 {
					if c.Meta.Epoch != 0 && c.Meta.Epoch>>32 == 0 && r.Code == CodeOK && !r.Duplicate {
						t.Fatalf("entry %d: %v under the old era's epoch %d counted", i+1, c.Type(), c.Meta.Epoch)
					}
					break
				}
				for k, m := range append([]TaskMeta{c.Meta}, c.More...) {
					if m.Epoch != 0 && m.Epoch>>32 == 0 && k < len(r.Renewed) && r.Renewed[k].Code == CodeOK && !r.Duplicate {
						t.Fatalf("entry %d: a renewal under the old era's epoch %d counted", i+1, m.Epoch)
					}
				}
			case *TaskFinished, *TaskFailed:
				if m, _ := metaOf(c); m.Epoch != 0 && m.Epoch>>32 == 0 && r.Code == CodeOK && !r.Ignored && !r.Duplicate {
					t.Fatalf("entry %d: %v under the old era's epoch %d counted", i+1, c.Type(), m.Epoch)
				}
			}
		}
		for _, j := range oldJoins {
			if w := newCluster.Watch(j.job, j.group, j.c.Member, j.gen); w.Status != WatchClosed && w.Status != WatchReconnected {
				t.Fatalf("a watch of the old cluster's generation %d: %+v", j.gen, w)
			}
		}
		checkRoundTrip(t, newCluster)
	})
}
