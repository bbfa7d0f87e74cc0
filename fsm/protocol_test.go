package fsm

import (
	"bytes"
	"errors"
	"testing"
)

func TestProtocolLevelRisesOnly(t *testing.T) {
	h := newHarness(t)
	if got := h.f.Protocol(); got != Protocol1 {
		t.Fatalf("a new state is at level %d, want %d", got, Protocol1)
	}
	h.fails(&SetProtocol{Level: 0}, ErrInvalid)
	h.ignored(&SetProtocol{Level: Protocol1})
	h.ok(&SetProtocol{Level: Protocol2})
	if got := h.f.Protocol(); got != Protocol2 {
		t.Fatalf("level %d after SetProtocol(%d)", got, Protocol2)
	}
	h.ignored(&SetProtocol{Level: Protocol1})
	if got := h.f.Protocol(); got != Protocol2 {
		t.Fatalf("the level fell to %d", got)
	}
}

// A level above this build's is an entry from a newer release: the FSM
// halts on it rather than apply what follows with the wrong semantics.
func TestProtocolAboveThisBuildHalts(t *testing.T) {
	f := New()
	b := Encode(&SetProtocol{Header: Header{Now: t0}, Level: Protocol + 1})
	if _, err := Decode(b); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Decode of level %d: %v, want ErrUnsupported", Protocol+1, err)
	}
	f.ApplyEntry(1, b)
	select {
	case <-f.Halted():
	default:
		t.Fatalf("the FSM did not halt on level %d", Protocol+1)
	}
}

// The snapshot version follows the level: a state at Protocol1 writes
// version 4, which the previous release reads, and keeps its level through
// a round trip; at Protocol2 it writes version 5 with the level in it.
func TestSnapshotVersionFollowsTheLevel(t *testing.T) {
	f := New()
	f.ApplyEntry(1, Encode(&CreateJob{Header: Header{Now: t0, Job: "a"}}))
	if v := snapshotVersionOf(t, f); v != 4 {
		t.Fatalf("a Protocol1 state writes snapshot version %d, want 4", v)
	}
	f.ApplyEntry(2, Encode(&SetProtocol{Header: Header{Now: t0}, Level: Protocol2}))
	if v := snapshotVersionOf(t, f); v != 5 {
		t.Fatalf("a Protocol2 state writes snapshot version %d, want 5", v)
	}
	g := New()
	if err := g.Restore(readCloser(f.SnapshotBytes())); err != nil {
		t.Fatal(err)
	}
	if g.Protocol() != Protocol2 || g.StateHash() != f.StateHash() {
		t.Fatalf("after a round trip: level %d, hash equal %v", g.Protocol(), g.StateHash() == f.StateHash())
	}
}

func TestAllowsRefusesCommandsAboveTheLevel(t *testing.T) {
	f := New()
	if err := f.Allows(&SetProtocol{Level: Protocol}); err != nil {
		t.Fatalf("SetProtocol must be proposable at level 1: %v", err)
	}
	for typ := CmdType(1); typ < numTypes; typ++ {
		spec := lookup(typ)
		err := f.Allows(spec.new())
		if spec.since > Protocol1 && !errors.Is(err, ErrUpgradePending) {
			t.Errorf("%v needs level %d, but a level 1 cluster allows it: %v", typ, spec.since, err)
		}
		if spec.since <= Protocol1 && err != nil {
			t.Errorf("%v: %v", typ, err)
		}
	}
}

func snapshotVersionOf(t *testing.T, f *FSM) uint64 {
	t.Helper()
	b := f.SnapshotBytes()
	if !bytes.HasPrefix(b, []byte(snapshotMagic)) {
		t.Fatalf("no magic")
	}
	d := &decoder{buf: b[len(snapshotMagic):]}
	return d.uvarint()
}

// A type of a later level is refused below it, by the leader (Allows) and
// by apply on every replica alike, and applied from it on.
func TestTypeOfALaterLevel(t *testing.T) {
	saved := commands[TypeCreateJob]
	commands[TypeCreateJob] = saved.from(Protocol2)
	defer func() { commands[TypeCreateJob] = saved }()

	f := New()
	c := &CreateJob{Header: Header{Now: t0, Job: "a"}}
	if err := f.Allows(c); !errors.Is(err, ErrUpgradePending) {
		t.Fatalf("Allows at level 1: %v, want ErrUpgradePending", err)
	}
	if r := f.ApplyEntry(1, Encode(c)); r.Code != CodeInvalid {
		t.Fatalf("applied at level 1: %+v, want invalid", r)
	}
	if _, ok := f.Job("a"); ok {
		t.Fatal("the refused command created its job")
	}
	f.ApplyEntry(2, Encode(&SetProtocol{Header: Header{Now: t0}, Level: Protocol2}))
	if err := f.Allows(c); err != nil {
		t.Fatalf("Allows at level 2: %v", err)
	}
	if r := f.ApplyEntry(3, Encode(c)); r.Code != CodeOK {
		t.Fatalf("at level 2: %+v", r)
	}
}
