package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// requestSave asks for the save-model lease and returns whether it was
// granted.
func (h *harness) requestSave(trainer string, d time.Duration) bool {
	h.t.Helper()
	return h.ok(&RequestSaveModel{TrainerID: trainer, BlockDur: d}).Granted
}

func (h *harness) wantHolder(trainer string) {
	h.t.Helper()
	got, _, ok := h.f.SaveModelHolder(DefaultJob)
	if got != trainer || ok != (trainer != "") {
		h.t.Fatalf("save-model holder %q (%v), want %q", got, ok, trainer)
	}
}

func TestSaveModel(t *testing.T) {
	runScenarios(t, []scenario{
		{"one holder at a time", func(h *harness) {
			if !h.requestSave("a", 10*time.Second) {
				h.t.Fatalf("free lease refused")
			}
			h.advance(5 * time.Second)
			if h.requestSave("b", time.Second) {
				h.t.Fatalf("lease granted to b while a holds it")
			}
			h.wantHolder("a")
			if !h.requestSave("a", 10*time.Second) {
				h.t.Fatalf("holder's re-request refused")
			}
			if _, d, _ := h.f.SaveModelHolder(DefaultJob); d != h.now+int64(10*time.Second) {
				h.t.Fatalf("re-request did not move the lease end")
			}
			h.advance(10*time.Second - 1)
			if h.requestSave("b", time.Second) {
				h.t.Fatalf("lease granted to b before a's lease ended")
			}
			h.advance(1)
			if !h.requestSave("b", time.Second) { // expired, even without a Tick
				h.t.Fatalf("expired lease refused")
			}
			h.wantHolder("b")
		}},
		{"tick releases an expired lease", func(h *harness) {
			h.requestSave("a", time.Second)
			if d, ok := h.f.NextDeadline(); !ok || d != h.now+int64(time.Second) {
				h.t.Fatalf("NextDeadline %d %v, want the lease end", d, ok)
			}
			h.advance(time.Second)
			h.tick()
			h.wantHolder("")
			if _, ok := h.f.NextDeadline(); ok {
				h.t.Fatalf("released lease still has a deadline")
			}
			if !h.requestSave("b", time.Second) {
				h.t.Fatalf("released lease refused")
			}
		}},
	})
}

func TestNodeRegistry(t *testing.T) {
	n1 := Registration{ID: "n1", RaftAddr: "10.0.0.1:7000", APIAddr: "10.0.0.1:8080"}
	n2 := Registration{ID: "n2", RaftAddr: "10.0.0.2:7000", APIAddr: "10.0.0.2:8080"}
	runScenarios(t, []scenario{
		{"register, update and remove", func(h *harness) {
			h.ok(&RegisterNode{Node: n2})
			h.ok(&RegisterNode{Node: n1})
			if got := h.f.Registrations(); !slices.Equal(got, []Registration{n1, n2}) {
				h.t.Fatalf("nodes %v, want n1 and n2 sorted", got)
			}
			moved := Registration{ID: "n1", RaftAddr: "10.0.0.9:7000", APIAddr: "10.0.0.9:8080"}
			h.ok(&RegisterNode{Node: moved})
			if got, ok := h.f.Registration("n1"); !ok || got != moved {
				h.t.Fatalf("Node(n1) = %v %v, want %v", got, ok, moved)
			}
			if got, ok := h.f.RegistrationByRaftAddr(n2.RaftAddr); !ok || got != n2 {
				h.t.Fatalf("RegistrationByRaftAddr = %v %v, want %v", got, ok, n2)
			}
			if _, ok := h.f.RegistrationByRaftAddr(n1.RaftAddr); ok {
				h.t.Fatalf("old address still found")
			}
			h.ok(&RemoveNode{ID: "n2"})
			h.ignored(&RemoveNode{ID: "n2"})
			if _, ok := h.f.Registration("n2"); ok || h.f.Stats(DefaultJob).Nodes != 1 {
				h.t.Fatalf("n2 not removed")
			}
		}},
		{"registry is bounded", func(h *harness) {
			for i := range MaxNodes {
				h.ok(&RegisterNode{Node: Registration{ID: fmt.Sprint("n", i)}})
			}
			h.rejects(&RegisterNode{Node: Registration{ID: "extra"}})
			h.ok(&RegisterNode{Node: Registration{ID: "n0", APIAddr: "x:1"}}) // updates still work
		}},
	})
}

// A node's release is a field of Protocol2: below it, a registration that
// carries one is refused on every replica, as replicas of earlier releases
// refuse its trailing bytes, and one without it is encoded as they encode
// it; from Protocol2 on the registry keeps it, and snapshots carry it.
func TestRegistrationRelease(t *testing.T) {
	plain := Registration{ID: "n1", RaftAddr: "10.0.0.1:7000", APIAddr: "10.0.0.1:8080"}
	withRelease := plain
	withRelease.Version, withRelease.Protocol = "v1.5.0", Protocol2

	// The encoding of earlier releases: the header, then three strings.
	var e encoder
	e.string(plain.ID)
	e.string(plain.RaftAddr)
	e.string(plain.APIAddr)
	if b := Encode(&RegisterNode{Node: plain}); !bytes.HasSuffix(b, e.buf) {
		t.Fatalf("a registration without a release is not encoded as earlier releases encode it")
	}
	if n := len(Encode(&RegisterNode{Node: withRelease})) - len(Encode(&RegisterNode{Node: plain})); n <= 0 {
		t.Fatalf("a release adds %d bytes", n)
	}
	if got := withRelease.AtLevel(Protocol1); got != plain {
		t.Fatalf("AtLevel(1) = %+v, want %+v", got, plain)
	}
	if got := withRelease.AtLevel(Protocol2); got != withRelease {
		t.Fatalf("AtLevel(2) = %+v, want %+v", got, withRelease)
	}

	h := newHarness(t)
	h.ok(&RegisterNode{Node: plain})
	for _, r := range []Registration{withRelease, {ID: "n1", Version: "v1"}, {ID: "n1", Protocol: Protocol2}} {
		h.rejects(&RegisterNode{Node: r})
	}
	if err := h.f.Allows(&RegisterNode{Node: withRelease}); !errors.Is(err, ErrUpgradePending) {
		t.Fatalf("Allows a release at level 1: %v, want ErrUpgradePending", err)
	}
	if err := h.f.Allows(&RegisterNode{Node: plain}); err != nil {
		t.Fatalf("Allows a registration without a release at level 1: %v", err)
	}
	h.ok(&SetProtocol{Level: Protocol2})
	if got, _ := h.f.Registration("n1"); got != plain {
		t.Fatalf("raising the level changed the entry: %+v", got)
	}
	h.ok(&RegisterNode{Node: withRelease})
	if got, _ := h.f.Registration("n1"); got != withRelease {
		t.Fatalf("n1 = %+v, want %+v", got, withRelease)
	}
	h.rejects(&RegisterNode{Node: Registration{ID: "n2", Version: strings.Repeat("v", MaxIDLen+1)}})

	g := New()
	if err := g.Restore(readCloser(h.f.SnapshotBytes())); err != nil {
		t.Fatal(err)
	}
	if got, _ := g.Registration("n1"); got != withRelease {
		t.Fatalf("after a snapshot round trip n1 = %+v, want %+v", got, withRelease)
	}
}

// A snapshot that records a release in a state below Protocol2 is damaged:
// Restore refuses it.
func TestRestoreRefusesAReleaseBelowProtocol2(t *testing.T) {
	s := newState()
	s.nodes["n1"] = Registration{ID: "n1", Version: "v1.5.0", Protocol: Protocol2}
	var b bytes.Buffer
	if err := encodeStateVersion(&b, s, 5); err != nil {
		t.Fatal(err)
	}
	if err := New().Restore(readCloser(b.Bytes())); err == nil {
		t.Fatal("restored a level 1 state whose registry holds a release")
	}
}
