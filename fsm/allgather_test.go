package fsm

import (
	"errors"
	"slices"
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
	w := h.f.Watch("g", memberID(n), gen)
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
			if g, _ := h.f.Group("g"); g.Status != "timed_out" {
				h.t.Fatalf("group %+v, want timed_out", g)
			}
			h.advance(5 * time.Second) // the timed-out group is forgotten
			h.tick()
			if len(h.f.Groups()) != 0 {
				h.t.Fatalf("timed-out group not forgotten: %+v", h.f.Groups())
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
			if g, _ := h.f.Group("g"); g.Status != "open" || !g.Overdue || g.Deadline != h.now+int64(AbandonedGroupTimeout) {
				h.t.Fatalf("group %+v, want open, overdue, kept for AbandonedGroupTimeout", g)
			}
			// A late member still completes it, for every member.
			h.advance(time.Hour)
			g3 := h.join(3, 3, "c")
			h.wantData(h.watch(1, g1, WatchComplete), 0, "a", "b", "c")
			h.wantData(h.watch(3, g3, WatchComplete), 2, "a", "b", "c")
			if g, _ := h.f.Group("g"); g.Overdue {
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
			if w := behind.Watch("g", memberID(1), g1); w.Status != WatchPending {
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
			g, _ := h.f.Group("g")
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
			if g, _ := h.f.Group("g"); len(g.Members) != 2 || g.Status != "complete" {
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
			if len(h.f.Groups()) != 0 {
				h.t.Fatalf("group not closed: %+v", h.f.Groups())
			}
			if w := h.watch(2, g2, WatchClosed); !errors.Is(w.Err(), ErrClosed) {
				h.t.Fatalf("watch error %v, want ErrClosed", w.Err())
			}
		}},
		{"last member out of an open group", func(h *harness) {
			h.join(1, 2, "a")
			h.ok(&Leave{Group: "g", Member: memberID(1)})
			if len(h.f.Groups()) != 0 {
				h.t.Fatalf("group not closed: %+v", h.f.Groups())
			}
		}},
		{"complete group is forgotten after retention", func(h *harness) {
			h.join(1, 1, "a")
			h.advance(time.Minute - 1)
			h.tick()
			if len(h.f.Groups()) != 1 {
				h.t.Fatalf("group forgotten early")
			}
			h.advance(1)
			h.tick()
			if len(h.f.Groups()) != 0 {
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
	if g, _ := h.f.Group("g"); len(g.Members) != MaxGroupData/MaxMemberData {
		t.Fatalf("group has %d members", len(g.Members))
	}
}
