package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// join adds member n with data to group "g" of numPeers and returns the
// join's generation.
func (h *harness) join(n byte, numPeers int, data string) uint64 {
	h.t.Helper()
	return h.ok(&Join{Group: "g", Member: memberID(n), NumPeers: numPeers, Data: []byte(data), Timeout: time.Minute}).Generation
}

// watch fails the test unless member n's join gen sees status.
func (h *harness) watch(n byte, gen uint64, status WatchStatus) WatchResult {
	h.t.Helper()
	w := h.f.Watch(DefaultJob, "g", memberID(n), gen)
	if w.Status != status {
		h.t.Fatalf("member %d generation %d: status %d, want %d", n, gen, w.Status, status)
	}
	return w
}

// wantData fails the test unless w holds data in rank order and rank.
func (h *harness) wantData(w WatchResult, rank int, data ...string) {
	h.t.Helper()
	got := make([]string, len(w.Data))
	for i, d := range w.Data {
		got[i] = string(d)
	}
	if !slices.Equal(got, data) || w.Rank != rank {
		h.t.Fatalf("data %q rank %d, want %q rank %d", got, w.Rank, data, rank)
	}
}

func TestAllGather(t *testing.T) {
	runScenarios(t, []scenario{
		{"completes in join order", func(h *harness) {
			g3 := h.join(3, 3, "c")
			g1 := h.join(1, 3, "a")
			h.watch(3, g3, WatchPending)
			g2 := h.join(2, 3, "b")
			h.wantData(h.watch(3, g3, WatchComplete), 0, "c", "a", "b")
			h.wantData(h.watch(1, g1, WatchComplete), 1, "c", "a", "b")
			h.wantData(h.watch(2, g2, WatchComplete), 2, "c", "a", "b")
			if g1 <= g3 || g2 <= g1 {
				h.t.Fatalf("generations %d %d %d do not increase", g3, g1, g2)
			}
		}},
		{"single peer completes at once", func(h *harness) {
			gen := h.join(1, 1, "solo")
			h.wantData(h.watch(1, gen, WatchComplete), 0, "solo")
		}},
		{"reconnect", func(h *harness) {
			old := h.join(1, 2, "first")
			gen := h.join(1, 2, "second")
			w := h.watch(1, old, WatchReconnected)
			if !errors.Is(w.Err(), ErrReconnected) {
				h.t.Fatalf("old watch error %v, want ErrReconnected", w.Err())
			}
			h.watch(1, gen, WatchPending)
			h.watch(1, gen+1, WatchPending) // a join not applied here yet
			h.join(2, 2, "other")
			h.wantData(h.watch(1, gen, WatchComplete), 0, "second", "other")
			h.watch(1, old, WatchReconnected)
		}},
		{"leave before completion", func(h *harness) {
			g1 := h.join(1, 3, "a")
			h.join(2, 3, "b")
			h.ok(&Leave{Group: "g", Member: memberID(1)})
			if w := h.watch(1, g1, WatchClosed); !errors.Is(w.Err(), ErrClosed) {
				h.t.Fatalf("left member's watch error %v, want ErrClosed", w.Err())
			}
			h.ignored(&Leave{Group: "g", Member: memberID(1)})
			h.ignored(&Leave{Group: "g", Member: memberID(9)})
			h.ignored(&Leave{Group: "nope", Member: memberID(1)})
			h.join(3, 3, "c")
			g1 = h.join(1, 3, "a2")
			h.wantData(h.watch(1, g1, WatchComplete), 2, "b", "c", "a2")
		}},
		{"hard timeout fails the group", func(h *harness) {
			g1 := h.ok(&Join{Group: "g", Member: memberID(1), NumPeers: 2, Data: []byte("a"), Timeout: 5 * time.Second, FailOnTimeout: true}).Generation
			if d, ok := h.f.NextDeadline(); !ok || d != h.now+int64(5*time.Second) {
				h.t.Fatalf("NextDeadline %d %v, want the group timeout", d, ok)
			}
			h.advance(5 * time.Second)
			h.tick()
			if w := h.watch(1, g1, WatchTimedOut); !errors.Is(w.Err(), ErrAllGatherTimeoutExceeded) {
				h.t.Fatalf("watch error %v, want ErrAllGatherTimeoutExceeded", w.Err())
			}
			if g, _ := h.f.Group(DefaultJob, "g"); g.Status != "timed_out" {
				h.t.Fatalf("group %+v, want timed_out", g)
			}
			h.advance(5 * time.Second) // the timed-out group is forgotten
			h.tick()
			if len(h.f.Groups(DefaultJob)) != 0 {
				h.t.Fatalf("timed-out group not forgotten: %+v", h.f.Groups(DefaultJob))
			}
		}},
		{"timeout leaves the group open and overdue", func(h *harness) {
			g1 := h.ok(&Join{Group: "g", Member: memberID(1), NumPeers: 3, Data: []byte("a"), Timeout: 5 * time.Second}).Generation
			g2 := h.join(2, 3, "b")
			h.advance(5*time.Second - 1)
			h.tick()
			if w := h.watch(1, g1, WatchPending); w.Overdue {
				h.t.Fatalf("overdue before the timeout")
			}
			h.advance(1)
			h.tick()
			for _, w := range []WatchResult{h.watch(1, g1, WatchPending), h.watch(2, g2, WatchPending)} {
				if !w.Overdue || w.Err() != nil {
					h.t.Fatalf("watch %+v after the timeout, want pending and overdue", w)
				}
			}
			if g, _ := h.f.Group(DefaultJob, "g"); g.Status != "open" || !g.Overdue || g.Deadline != h.now+int64(AbandonedGroupTimeout) {
				h.t.Fatalf("group %+v, want open, overdue, kept for AbandonedGroupTimeout", g)
			}
			// A late member still completes it, for every member.
			h.advance(time.Hour)
			g3 := h.join(3, 3, "c")
			h.wantData(h.watch(1, g1, WatchComplete), 0, "a", "b", "c")
			h.wantData(h.watch(3, g3, WatchComplete), 2, "a", "b", "c")
			if g, _ := h.f.Group(DefaultJob, "g"); g.Overdue {
				h.t.Fatalf("complete group %+v still overdue", g)
			}
		}},
		{"abandoned overdue group is forgotten", func(h *harness) {
			g1 := h.ok(&Join{Group: "g", Member: memberID(1), NumPeers: 3, Timeout: time.Second}).Generation
			h.advance(time.Second)
			h.tick()
			h.advance(AbandonedGroupTimeout - time.Second)
			h.join(2, 3, "b") // a join keeps it
			h.advance(AbandonedGroupTimeout - 1)
			h.tick()
			h.watch(1, g1, WatchPending)
			h.advance(1)
			h.tick()
			if w := h.watch(1, g1, WatchClosed); !errors.Is(w.Err(), ErrClosed) {
				h.t.Fatalf("abandoned group's watch error %v, want ErrClosed", w.Err())
			}
		}},
		{"a replica that has not applied the join waits", func(h *harness) {
			g1 := h.join(1, 2, "a")
			behind := New() // a follower, or a leader before its barrier
			if w := behind.Watch(DefaultJob, "g", memberID(1), g1); w.Status != WatchPending {
				h.t.Fatalf("a replica without the join answers %+v, want pending", w)
			}
			h.ok(&Leave{Group: "g", Member: memberID(1)})
			h.watch(1, g1, WatchClosed) // after the join, closed is final
		}},
		{"join after a hard timeout starts afresh", func(h *harness) {
			g1 := h.ok(&Join{Group: "g", Member: memberID(1), NumPeers: 3, Data: []byte("a"), Timeout: time.Minute, FailOnTimeout: true}).Generation
			h.advance(time.Minute)
			h.tick()
			g2 := h.ok(&Join{Group: "g", Member: memberID(2), NumPeers: 2, Data: []byte("b")}).Generation
			g, _ := h.f.Group(DefaultJob, "g")
			if g.Status != "open" || g.NumPeers != 2 || len(g.Members) != 1 || g.Timeout != DefaultTimeout {
				h.t.Fatalf("group %+v, want a fresh open group of 2 with the default timeout", g)
			}
			h.watch(1, g1, WatchClosed)
			g1 = h.join(1, 2, "a")
			h.wantData(h.watch(2, g2, WatchComplete), 0, "b", "a")
			h.wantData(h.watch(1, g1, WatchComplete), 1, "b", "a")
		}},
		{"re-join after completion gets the completed result", func(h *harness) {
			old := h.join(1, 2, "a")
			h.join(2, 2, "b")
			gen := h.join(1, 2, "ignored")
			h.watch(1, old, WatchReconnected)
			h.wantData(h.watch(1, gen, WatchComplete), 0, "a", "b")
		}},
		{"mismatch", func(h *harness) {
			h.join(1, 2, "a")
			h.fails(&Join{Group: "g", Member: memberID(2), NumPeers: 3}, ErrGroupMismatch)
			h.fails(&Join{Group: "g", Member: memberID(1), NumPeers: 3}, ErrGroupMismatch)
			h.join(2, 2, "b")
			h.fails(&Join{Group: "g", Member: memberID(3), NumPeers: 2}, ErrGroupMismatch)
			if g, _ := h.f.Group(DefaultJob, "g"); len(g.Members) != 2 || g.Status != "complete" {
				h.t.Fatalf("group %+v changed by mismatched joins", g)
			}
		}},
		{"last member out closes the group", func(h *harness) {
			g1 := h.join(1, 2, "a")
			g2 := h.join(2, 2, "b")
			h.ok(&Leave{Group: "g", Member: memberID(1)})
			h.watch(1, g1, WatchClosed)
			h.wantData(h.watch(2, g2, WatchComplete), 1, "a", "b")
			h.ok(&Leave{Group: "g", Member: memberID(2)})
			if len(h.f.Groups(DefaultJob)) != 0 {
				h.t.Fatalf("group not closed: %+v", h.f.Groups(DefaultJob))
			}
			if w := h.watch(2, g2, WatchClosed); !errors.Is(w.Err(), ErrClosed) {
				h.t.Fatalf("watch error %v, want ErrClosed", w.Err())
			}
		}},
		{"last member out of an open group", func(h *harness) {
			h.join(1, 2, "a")
			h.ok(&Leave{Group: "g", Member: memberID(1)})
			if len(h.f.Groups(DefaultJob)) != 0 {
				h.t.Fatalf("group not closed: %+v", h.f.Groups(DefaultJob))
			}
		}},
		{"complete group is forgotten after retention", func(h *harness) {
			h.join(1, 1, "a")
			h.advance(time.Minute - 1)
			h.tick()
			if len(h.f.Groups(DefaultJob)) != 1 {
				h.t.Fatalf("group forgotten early")
			}
			h.advance(1)
			h.tick()
			if len(h.f.Groups(DefaultJob)) != 0 {
				h.t.Fatalf("group kept after retention")
			}
		}},
	})
}

// TestAllGatherDataLimit skips the harness's round trip: the group holds
// MaxGroupData bytes.
func TestAllGatherDataLimit(t *testing.T) {
	h := &harness{t: t, f: New(), now: t0}
	big := make([]byte, MaxMemberData)
	for i := range MaxGroupData / MaxMemberData {
		h.ok(&Join{Group: "g", Member: memberID(byte(i + 1)), NumPeers: 100, Data: big})
	}
	if r := h.apply(&Join{Group: "g", Member: memberID(99), NumPeers: 100, Data: []byte{1}}); r.Code != CodeInvalid {
		t.Fatalf("join beyond MaxGroupData: %v, want CodeInvalid", r.Code)
	}
	h.ok(&Join{Group: "g", Member: memberID(1), NumPeers: 100, Data: big}) // a replacement fits
	if g, _ := h.f.Group(DefaultJob, "g"); len(g.Members) != MaxGroupData/MaxMemberData {
		t.Fatalf("group has %d members", len(g.Members))
	}
}

// checkIndex fails the test unless group id's member index maps exactly
// its members to their slots.
func checkIndex(t interface{ Fatalf(string, ...any) }, f *FSM, job, id string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j := f.s.jobs[job]
	if j == nil || j.groups[id] == nil {
		return
	}
	g := j.groups[id]
	if len(g.index) != len(g.members) {
		t.Fatalf("group %s: index of %d entries for %d members", id, len(g.index), len(g.members))
	}
	for i, m := range g.members {
		if j, ok := g.index[m.id]; !ok || int(j) != i {
			t.Fatalf("group %s: member %s in slot %d, index says %d (%v)", id, m.id, i, j, ok)
		}
	}
}

// fired reports whether ch is closed (nil never fires).
func fired(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestAllGatherIndex(t *testing.T) {
	runScenarios(t, []scenario{
		{"leave before completion shifts the ranks", func(h *harness) {
			g1 := h.join(1, 4, "a")
			h.join(2, 4, "b")
			g3 := h.join(3, 4, "c")
			h.ok(&Leave{Group: "g", Member: memberID(2)}) // 3 moves up to rank 1
			checkIndex(h.t, h.f, DefaultJob, "g")
			h.watch(2, 1, WatchClosed)
			h.watch(3, g3, WatchPending)
			h.watch(1, g1, WatchPending)
			g1 = h.join(1, 4, "a2") // a re-join keeps its slot
			checkIndex(h.t, h.f, DefaultJob, "g")
			g2 := h.join(2, 4, "b2") // back, at the end
			h.ok(&Leave{Group: "g", Member: memberID(1)})
			h.watch(1, g1, WatchClosed)
			checkIndex(h.t, h.f, DefaultJob, "g")
			g1 = h.join(1, 4, "a3")
			g4 := h.join(4, 4, "d")
			checkIndex(h.t, h.f, DefaultJob, "g")
			want := []string{"c", "b2", "a3", "d"}
			for rank, m := range []struct {
				n   byte
				gen uint64
			}{{3, g3}, {2, g2}, {1, g1}, {4, g4}} {
				h.wantData(h.watch(m.n, m.gen, WatchComplete), rank, want...)
			}
			h.watch(9, g4, WatchClosed) // a stranger is not found
		}},
		{"re-join and leave after completion keep the slots", func(h *harness) {
			h.join(1, 3, "a")
			g2 := h.join(2, 3, "b")
			h.join(3, 3, "c")
			g1 := h.join(1, 3, "ignored")
			h.ok(&Leave{Group: "g", Member: memberID(3)})
			checkIndex(h.t, h.f, DefaultJob, "g")
			h.wantData(h.watch(1, g1, WatchComplete), 0, "a", "b", "c")
			h.wantData(h.watch(2, g2, WatchComplete), 1, "a", "b", "c")
		}},
	})
}

// TestAllGatherIndexRestored: a restored state rebuilds the index and the
// gathered data, which the snapshot does not hold, and the snapshot bytes
// are those of before.
func TestAllGatherIndexRestored(t *testing.T) {
	h := newHarness(t)
	h.join(1, 3, "a")
	h.join(2, 3, "b")
	h.join(3, 3, "c")
	h.fails(&Join{Group: "g", Member: memberID(4), NumPeers: 3}, ErrGroupMismatch) // a stranger after completion
	h.ok(&Join{Group: "open", Member: memberID(5), NumPeers: 3, Data: []byte("e")})
	h.ok(&Join{Group: "open", Member: memberID(6), NumPeers: 3, Data: []byte("f")})
	h.ok(&Leave{Group: "open", Member: memberID(5)})
	before := h.f.SnapshotBytes()
	f := restored(t, before)
	if !bytes.Equal(f.SnapshotBytes(), before) {
		t.Fatalf("the restored state encodes differently")
	}
	for _, id := range []string{"g", "open"} {
		checkIndex(t, f, DefaultJob, id)
	}
	var gathered *Gathered
	for n, rank := range map[byte]int{1: 0, 2: 1, 3: 2} {
		g, _ := f.Group(DefaultJob, "g")
		w := f.Watch(DefaultJob, "g", memberID(n), g.Members[rank].Generation)
		if w.Status != WatchComplete || w.Rank != rank || len(w.Data) != 3 || string(w.Data[rank]) != string([]byte{"abc"[rank]}) {
			t.Fatalf("member %d after restore: %+v", n, w)
		}
		if gathered != nil && w.Gathered != gathered {
			t.Fatalf("the restored completion is gathered more than once")
		}
		gathered = w.Gathered
	}
	if g, _ := f.Group(DefaultJob, "open"); f.Watch(DefaultJob, "open", memberID(6), g.Members[0].Generation).Status != WatchPending {
		t.Fatalf("open group's member after restore: %+v", g)
	}
}

// TestGatheredEncodedOnce: every watch of a completion shares one
// Gathered, whose encoding is computed once; re-joins and leaves after
// completion keep it, and a new completion of the same group id, after
// the group closed, gets a new one.
func TestGatheredEncodedOnce(t *testing.T) {
	h := newHarness(t)
	g1 := h.join(1, 2, "a")
	g2 := h.join(2, 2, "b")
	w1, w2 := h.watch(1, g1, WatchComplete), h.watch(2, g2, WatchComplete)
	if w1.Gathered == nil || w1.Gathered != w2.Gathered {
		t.Fatalf("the watches of one completion do not share its data")
	}
	calls := 0
	encode := func(data [][]byte) []byte {
		calls++
		return bytes.Join(data, []byte(","))
	}
	for _, w := range []WatchResult{w1, w2, w1} {
		if got := string(w.Gathered.Encoded(encode)); got != "a,b" || calls != 1 {
			t.Fatalf("encoded %q after %d encodings, want \"a,b\" after 1", got, calls)
		}
	}
	g1 = h.join(1, 2, "ignored") // a re-join after completion
	h.ok(&Leave{Group: "g", Member: memberID(2)})
	if w := h.watch(1, g1, WatchComplete); w.Gathered != w1.Gathered {
		t.Fatalf("a re-join or leave after completion replaced the gathered data")
	}
	h.ok(&Leave{Group: "g", Member: memberID(1)}) // the group closes
	g1 = h.join(1, 2, "c")
	g2 = h.join(2, 2, "d")
	w := h.watch(2, g2, WatchComplete)
	if w.Gathered == w1.Gathered || string(w.Gathered.Encoded(encode)) != "c,d" || calls != 2 {
		t.Fatalf("a new completion kept the old data: %q", w.Gathered.Encoded(encode))
	}
	h.wantData(h.watch(1, g1, WatchComplete), 0, "c", "d")
	h.advance(time.Minute) // past the retention: the group and its data go
	h.tick()
	if h.f.Watch(DefaultJob, "g", memberID(1), g1).Status != WatchClosed || len(h.f.Groups(DefaultJob)) != 0 {
		t.Fatalf("complete group kept after its retention")
	}
}

// TestWatchWaitWakesOnlyItsGroup: a wait on a member of group "g" is not
// woken by other groups, task commands or ticks, nor by other members'
// joins that leave its answer pending; it is woken by its own member's
// changes and by the group's outcome. Nothing is left registered once the
// waits are released.
func TestWatchWaitWakesOnlyItsGroup(t *testing.T) {
	h := newHarness(t)
	g1 := h.join(1, 3, "a")
	res, w := h.f.WatchWait(DefaultJob, "g", memberID(1), g1)
	if res.Status != WatchPending || w == nil {
		t.Fatalf("WatchWait %+v %v, want pending with a wait", res, w)
	}
	quiet := func(what string) {
		t.Helper()
		if fired(w.Group) || fired(w.Member) {
			t.Fatalf("%s woke a watch of another group or member", what)
		}
	}
	h.ok(&Join{Group: "other", Member: memberID(1), NumPeers: 1, Data: []byte("x")})
	quiet("a join that completes another group")
	h.ok(&Join{Group: "other2", Member: memberID(2), NumPeers: 2})
	h.ok(&Leave{Group: "other2", Member: memberID(2)})
	quiet("a join and a leave of another group")
	h.ok(&SetDataset{Chunks: []Chunk{{Path: "p", Offset: 0, Records: 1}}, Params: defaultParams})
	h.ok(&GetTask{Pass: 0})
	h.tick()
	h.ok(&LeaderGrace{Grace: time.Second})
	quiet("task commands, ticks and a leader's grace")
	g2 := h.join(2, 3, "b")
	quiet("another member's join to the same open group")

	// The member's own changes wake it.
	g1 = h.join(1, 3, "a2")
	if !fired(w.Member) || fired(w.Group) {
		t.Fatalf("the member's re-join did not wake its watch")
	}
	w.Release()
	res, w = h.f.WatchWait(DefaultJob, "g", memberID(1), g1)
	if res.Status != WatchPending {
		t.Fatalf("after the re-join: %+v", res)
	}
	_, w2 := h.f.WatchWait(DefaultJob, "g", memberID(2), g2)
	h.join(3, 3, "c")
	if !fired(w.Group) || !fired(w2.Group) {
		t.Fatalf("completion did not wake every watch of the group")
	}
	w.Release()
	w2.Release()
	if res, w := h.f.WatchWait(DefaultJob, "g", memberID(1), g1); res.Status != WatchComplete || w != nil {
		t.Fatalf("a final answer came with a wait: %+v %v", res, w)
	}

	// A replica that has not applied the join yet wakes on any entry.
	res, w = h.f.WatchWait(DefaultJob, "later", memberID(1), h.f.s.nextGen+1)
	if res.Status != WatchPending {
		t.Fatalf("a join not applied yet: %+v", res)
	}
	h.tick()
	if !fired(w.Group) {
		t.Fatalf("a watch ahead of the log was not woken by the next entry")
	}
	w.Release()

	// Leaves and the timeout wake the group's watches; a restore wakes all.
	g5 := h.ok(&Join{Group: "t", Member: memberID(5), NumPeers: 3, Timeout: time.Second}).Generation
	g6 := h.ok(&Join{Group: "t", Member: memberID(6), NumPeers: 3}).Generation
	_, w5 := h.f.WatchWait(DefaultJob, "t", memberID(5), g5)
	_, w6 := h.f.WatchWait(DefaultJob, "t", memberID(6), g6)
	h.ok(&Leave{Group: "t", Member: memberID(5)})
	if !fired(w5.Member) || fired(w6.Member) || fired(w6.Group) {
		t.Fatalf("a leave woke the wrong watches")
	}
	w5.Release()
	h.advance(time.Second)
	h.tick()
	if !fired(w6.Group) {
		t.Fatalf("turning overdue did not wake the group's watch")
	}
	w6.Release()
	res, w6 = h.f.WatchWait(DefaultJob, "t", memberID(6), g6)
	if !res.Overdue || w6 == nil {
		t.Fatalf("overdue watch: %+v", res)
	}
	if err := h.f.Restore(readCloser(h.f.SnapshotBytes())); err != nil {
		t.Fatal(err)
	}
	if !fired(w6.Group) {
		t.Fatalf("a restore did not wake the watch")
	}
	w6.Release()
	w6.Release() // twice does nothing
	h.f.notifyMu.Lock()
	left := len(h.f.waits)
	h.f.notifyMu.Unlock()
	if left != 0 {
		t.Fatalf("%d groups still registered after every wait was released", left)
	}
}

// TestWatchWaitReleaseDropsEntries: waits that end without a change, as
// a long poll whose wait runs out, leave nothing behind.
func TestWatchWaitReleaseDropsEntries(t *testing.T) {
	h := newHarness(t)
	g1 := h.join(1, 2, "a")
	var waits []*Wait
	for range 3 {
		_, w := h.f.WatchWait(DefaultJob, "g", memberID(1), g1)
		waits = append(waits, w)
	}
	if waits[0].Group != waits[2].Group || waits[0].Member != waits[2].Member {
		t.Fatalf("waits on one member do not share their channels")
	}
	for _, w := range waits {
		w.Release()
	}
	h.f.notifyMu.Lock()
	left := len(h.f.waits)
	h.f.notifyMu.Unlock()
	if left != 0 {
		t.Fatalf("%d groups still registered after every wait was released", left)
	}
}

// TestRestoreRefusesDuplicateMember: the index is rebuilt from the
// members on restore, and a member twice in one group is refused rather
// than indexed once.
func TestRestoreRefusesDuplicateMember(t *testing.T) {
	h := newHarness(t)
	h.join(1, 3, "a")
	h.join(2, 3, "b")
	s := h.f.s.clone()
	s.jobs[DefaultJob].groups["g"].members[1].id = memberID(1)
	var b bytes.Buffer
	if err := encodeState(&b, s); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, b.Bytes())
}

// TestWatchWaitConcurrent: watches that wait with WatchWait while joins,
// re-joins, other groups' entries, ticks and restores are applied all see
// their group complete, with their rank, and leave nothing registered.
// Run with -race, it also checks the locking.
func TestWatchWaitConcurrent(t *testing.T) {
	const groups, peers = 4, 16
	f := New()
	var index uint64
	now := t0
	apply := func(c Command) *Result {
		c.Hdr().Now = now
		index++
		return f.ApplyEntry(index, Encode(c))
	}
	var wg sync.WaitGroup
	errs := make(chan error, groups*peers*2)
	parked := make(chan struct{})
	watch := func(group string, n byte, gen uint64) {
		defer wg.Done()
		for first := true; ; first = false {
			res, w := f.WatchWait(DefaultJob, group, memberID(n), gen)
			if first {
				parked <- struct{}{} // the next entry comes after this look
			}
			switch res.Status {
			case WatchComplete:
				if string(res.Data[res.Rank]) != group+string([]byte{n}) {
					errs <- fmt.Errorf("group %s member %d: rank %d holds %q", group, n, res.Rank, res.Data[res.Rank])
				}
				return
			case WatchReconnected:
				return // a later join of the member watches on
			case WatchPending:
			default:
				errs <- fmt.Errorf("group %s member %d: %v", group, n, res.Err())
				return
			}
			select {
			case <-w.Group:
			case <-w.Member:
			}
			w.Release()
		}
	}
	for n := range byte(peers) {
		for g := range groups {
			group := fmt.Sprintf("g%d", g)
			r := apply(&Join{Group: group, Member: memberID(n + 1), NumPeers: peers, Data: []byte(group + string([]byte{n + 1}))})
			wg.Add(1)
			go watch(group, n+1, r.Generation)
			<-parked
			if n%3 == 0 {
				// A re-join: the first join's watch sees it reconnected.
				r = apply(&Join{Group: group, Member: memberID(n + 1), NumPeers: peers, Data: []byte(group + string([]byte{n + 1}))})
				wg.Add(1)
				go watch(group, n+1, r.Generation)
				<-parked
			}
		}
		apply(&Join{Group: "solo", Member: memberID(n + 1), NumPeers: 1})
		now += int64(time.Second)
		apply(&Tick{})
		if n == peers/2 {
			if err := f.Restore(readCloser(f.SnapshotBytes())); err != nil {
				t.Fatal(err)
			}
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("watches still waiting on complete groups: a wake-up was lost")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	f.notifyMu.Lock()
	defer f.notifyMu.Unlock()
	if len(f.waits) != 0 {
		t.Fatalf("%d groups still registered after every watch ended", len(f.waits))
	}
}

// protocol2 raises the harness's state to Protocol2.
func (h *harness) protocol2() { h.t.Helper(); h.ok(&SetProtocol{Level: Protocol2}) }

// joinHard adds member n to group "g" of numPeers with a hard deadline of
// timeout.
func (h *harness) joinHard(n byte, numPeers int, data string, timeout time.Duration) uint64 {
	h.t.Helper()
	return h.ok(&Join{Group: "g", Member: memberID(n), NumPeers: numPeers, Data: []byte(data), Timeout: timeout, FailOnTimeout: true}).Generation
}

// TestAllGatherFinalAnswers: from Protocol2, a watch's final answer for a
// generation stays for the round's retention, whatever joins, leaves and
// ticks come after.
func TestAllGatherFinalAnswers(t *testing.T) {
	runScenarios(t, []scenario{
		{"a hard timeout stays the answer after the group starts afresh", func(h *harness) {
			h.protocol2()
			g1 := h.joinHard(1, 3, "a", 5*time.Second)
			g2 := h.joinHard(2, 3, "b", 5*time.Second)
			h.advance(5 * time.Second)
			h.tick()
			h.watch(1, g1, WatchTimedOut)
			h.watch(2, g2, WatchTimedOut)
			if gs := h.f.Groups(DefaultJob); len(gs) != 0 {
				h.t.Fatalf("groups %+v: a timed-out group keeps its place and its data", gs)
			}
			// Another member starts the group afresh; member 2 joins the
			// new round too. Neither changes the first round's answers.
			h.advance(time.Second)
			g3 := h.joinHard(3, 2, "c", time.Minute)
			h.watch(1, g1, WatchTimedOut)
			h.watch(2, g2, WatchTimedOut)
			g2b := h.joinHard(2, 2, "b2", time.Minute)
			h.watch(2, g2, WatchTimedOut)
			h.wantData(h.watch(2, g2b, WatchComplete), 1, "c", "b2")
			h.wantData(h.watch(3, g3, WatchComplete), 0, "c", "b2")
			h.watch(1, g1, WatchTimedOut)
			// Kept for ResultRetention, longer than the timeout.
			h.advance(ResultRetention - time.Second - 1)
			h.tick()
			h.watch(1, g1, WatchTimedOut)
			h.advance(1)
			h.tick()
			h.watch(1, g1, WatchClosed) // forgotten, and not in the new round
			h.watch(2, g2, WatchReconnected)
		}},
		{"a rejoin within the round that timed out stays reconnected", func(h *harness) {
			h.protocol2()
			old := h.joinHard(1, 2, "a", time.Second)
			cur := h.joinHard(1, 2, "a2", time.Second)
			h.ok(&Join{Group: "g", Member: memberID(2), NumPeers: 3, Data: []byte("x"), Timeout: time.Second, FailOnTimeout: true,
				Header: Header{Job: "other"}}) // a generation of another job in between
			h.advance(time.Second)
			h.tick()
			h.joinHard(2, 2, "b", time.Minute) // the next round
			h.watch(1, old, WatchReconnected)
			h.watch(1, cur, WatchTimedOut)
			h.watch(2, cur, WatchClosed) // member 2 was not in that round
		}},
		{"every member of a complete group keeps its data for the retention", func(h *harness) {
			h.protocol2()
			g1 := h.join(1, 2, "a")
			g2 := h.join(2, 2, "b")
			if g, _ := h.f.Group(DefaultJob, "g"); g.Deadline != h.now+int64(ResultRetention) {
				h.t.Fatalf("complete group kept until %d, want %d (ResultRetention)", g.Deadline, h.now+int64(ResultRetention))
			}
			h.advance(time.Minute) // the group's timeout: kept
			h.tick()
			h.wantData(h.watch(1, g1, WatchComplete), 0, "a", "b")
			// A re-join is the completed join again.
			if again := h.join(1, 2, "ignored"); again != g1 {
				h.t.Fatalf("re-join after completion got generation %d, want the completed join's %d", again, g1)
			}
			// A leave keeps the member's answer; the group closes when
			// the last member has left.
			h.ok(&Leave{Group: "g", Member: memberID(1)})
			h.wantData(h.watch(1, g1, WatchComplete), 0, "a", "b")
			h.wantData(h.watch(2, g2, WatchComplete), 1, "a", "b")
			h.ok(&Leave{Group: "g", Member: memberID(2)})
			h.watch(2, g2, WatchClosed)
		}},
		{"a complete group is forgotten after its retention", func(h *harness) {
			h.protocol2()
			g1 := h.join(1, 1, "a")
			h.advance(ResultRetention - 1)
			h.tick()
			h.wantData(h.watch(1, g1, WatchComplete), 0, "a")
			h.advance(1)
			h.tick()
			h.watch(1, g1, WatchClosed)
		}},
		{"a timed-out group of Protocol1 joined after the upgrade", func(h *harness) {
			g1 := h.joinHard(1, 2, "a", time.Minute)
			h.advance(time.Minute)
			h.tick()
			h.watch(1, g1, WatchTimedOut)
			h.protocol2()
			h.advance(time.Second)
			g2 := h.joinHard(2, 2, "b", time.Minute)
			h.watch(1, g1, WatchTimedOut)
			h.watch(2, g2, WatchPending)
			// Kept for what was left of the group's retention.
			h.advance(time.Minute - time.Second - 1)
			h.tick()
			h.watch(1, g1, WatchTimedOut)
			h.advance(1)
			h.tick()
			h.watch(1, g1, WatchClosed)
		}},
		{"kept rounds: deadline, grace, job TTL, estimate", func(h *harness) {
			h.protocol2()
			h.ok(&SetLimits{Limits: Limits{JobTTL: time.Second}})
			g1 := h.joinHard(1, 2, "a", time.Second)
			h.advance(time.Second)
			h.tick()
			if d, ok := h.f.NextDeadline(); !ok || d != h.now+int64(ResultRetention) {
				h.t.Fatalf("NextDeadline %d %v, want the end of the round's retention %d", d, ok, h.now+int64(ResultRetention))
			}
			if ji, ok := h.f.Job(DefaultJob); !ok || ji.CollectAt != 0 {
				h.t.Fatalf("job %+v: a job that keeps a round is collected", ji)
			}
			checkEstimate(h.t, h.f)
			h.ok(&LeaderGrace{Grace: ResultRetention + time.Minute})
			if d, _ := h.f.NextDeadline(); d != h.now+int64(ResultRetention+time.Minute) {
				h.t.Fatalf("NextDeadline %d after a grace, want it moved to %d", d, h.now+int64(ResultRetention+time.Minute))
			}
			h.advance(ResultRetention + time.Minute)
			h.tick()
			h.watch(1, g1, WatchClosed)
			if _, ok := h.f.Job(DefaultJob); ok {
				h.t.Fatalf("the job outlived its TTL once the round was forgotten")
			}
		}},
	})
}

// TestAllGatherTimedOutRoundsRestored: the kept rounds are in the
// snapshot (version 5), so a restored replica answers as the original.
func TestAllGatherTimedOutRoundsRestored(t *testing.T) {
	h := newHarness(t)
	h.protocol2()
	g1 := h.joinHard(1, 3, "a", time.Second)
	g2 := h.joinHard(2, 3, "b", time.Second)
	h.advance(time.Second)
	h.tick()
	g3 := h.joinHard(3, 3, "c", time.Second)
	h.advance(time.Second)
	h.tick()
	f := restored(t, h.f.SnapshotBytes())
	for _, w := range []struct {
		n   byte
		gen uint64
	}{{1, g1}, {2, g2}, {3, g3}} {
		if got := f.Watch(DefaultJob, "g", memberID(w.n), w.gen); got.Status != WatchTimedOut {
			t.Fatalf("member %d after restore: %+v, want timed out", w.n, got)
		}
	}
	checkEstimate(t, f)
}
