package fsm

import (
	"fmt"
	"slices"
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
