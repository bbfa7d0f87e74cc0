package raftnode

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/fsm"
)

// adapterLog returns n log entries of every command type, stamped with a
// clock that mostly advances, half of them with request ids (some reused),
// and a few that do not decode or are of an unknown ignorable type.
func adapterLog(n int) [][]byte {
	r := rand.New(rand.NewPCG(7, 11))
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	now := t0
	pick := func(names ...string) string { return names[r.IntN(len(names))] }
	member := func() uuid.UUID { return uuid.UUID{0: 0xaa, 15: byte(1 + r.IntN(3))} }
	meta := func() fsm.TaskMeta { return fsm.TaskMeta{ID: 1 + r.IntN(6), Epoch: r.IntN(4)} }
	var log [][]byte
	for i := range n {
		now += int64(r.IntN(3000)-200) * int64(time.Millisecond)
		h := fsm.Header{Now: now}
		if r.IntN(2) == 0 {
			h.Request = fsm.RequestID{Client: uuid.UUID{0: 0xcc, 15: byte(r.IntN(3))}, Seq: uint64(1 + r.IntN(i+1))}
		}
		p := fsm.DatasetParams{ChunksPerTask: 1 + r.IntN(2), TaskTimeout: time.Duration(1+r.IntN(20)) * time.Second, FailureMax: r.IntN(3)}
		var c fsm.Command
		switch r.IntN(int(fsm.TypeLeaderGrace) + 2) {
		case 0:
			c = &fsm.SetDataset{Header: h, Params: p, Chunks: dataset(1 + r.IntN(8))}
		case 1:
			c = &fsm.DatasetPart{Header: h, UploadID: pick("u0", "u1"), Part: uint32(r.IntN(3)), Chunks: dataset(r.IntN(4))}
		case 2:
			c = &fsm.DatasetCommit{Header: h, UploadID: pick("u0", "u1"), Parts: uint32(r.IntN(3)), NumChunks: uint32(r.IntN(8)), Params: p}
		case 3, 4:
			c = &fsm.GetTask{Header: h, Pass: r.IntN(3)}
		case 5:
			c = &fsm.TaskFinished{Header: h, Meta: meta()}
		case 6:
			c = &fsm.TaskFailed{Header: h, Meta: meta()}
		case 7:
			c = &fsm.RenewLease{Header: h, Meta: meta()}
		case 8:
			c = &fsm.Tick{Header: h}
		case 9:
			c = &fsm.RequestSaveModel{Header: h, TrainerID: pick("t0", "t1"), BlockDur: time.Duration(1+r.IntN(9)) * time.Second}
		case 10:
			c = &fsm.Join{Header: h, Group: pick("g0", "g1"), Member: member(), NumPeers: 2, Data: []byte{byte(i)},
				Timeout: time.Duration(r.IntN(20)) * time.Second, FailOnTimeout: r.IntN(2) == 0}
		case 11:
			c = &fsm.Leave{Header: h, Group: pick("g0", "g1"), Member: member()}
		case 12:
			c = &fsm.RegisterNode{Header: h, Node: fsm.Registration{ID: pick("n1", "n2"), RaftAddr: "r", APIAddr: "a"}}
		case 13:
			c = &fsm.RemoveNode{Header: h, ID: pick("n1", "n2")}
		case 14:
			c = &fsm.LeaderGrace{Header: h, Grace: time.Duration(r.IntN(30)) * time.Second}
		default:
			log = append(log, []byte{1, byte(fsm.TypeTick), 0xff}) // does not decode
			log = append(log, []byte{1, byte(fsm.IgnorableFlag | 0x7f), 1, 2})
			continue
		}
		log = append(log, fsm.Encode(c))
	}
	return log
}

// TestRaftFSMAgreesWithApplyEntry: a replica fed a log through the
// adapter's raft.FSM Apply gives the same results as one fed through
// ApplyEntry, and ends with the same bytes and applied index.
func TestRaftFSMAgreesWithApplyEntry(t *testing.T) {
	direct, replica := fsm.New(), fsm.New()
	a := raftFSM{f: replica}
	types := map[fsm.CmdType]bool{}
	// kinds of result the log must give, so that it exercises the FSM.
	kinds := map[string]func(r *fsm.Result) bool{
		"a leased task":    func(r *fsm.Result) bool { return r.Task != nil },
		"a granted save":   func(r *fsm.Result) bool { return r.Granted },
		"a join":           func(r *fsm.Result) bool { return r.Generation > 0 },
		"a duplicate":      func(r *fsm.Result) bool { return r.Duplicate },
		"an ignored entry": func(r *fsm.Result) bool { return r.Ignored },
		"an invalid entry": func(r *fsm.Result) bool { return r.Code == fsm.CodeInvalid },
		"a domain error":   func(r *fsm.Result) bool { return r.Code != fsm.CodeOK && r.Code != fsm.CodeInvalid },
	}
	seen := map[string]bool{}
	for i, b := range adapterLog(3000) {
		index := uint64(i + 1)
		if c, err := fsm.Decode(b); err == nil {
			types[c.Type()] = true
		}
		want := direct.ApplyEntry(index, b)
		got, ok := a.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: b}).(*fsm.Result)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("entry %d: the adapter answered %#v, ApplyEntry %#v", index, got, want)
		}
		for name, is := range kinds {
			seen[name] = seen[name] || is(got)
		}
	}
	if len(types) != int(fsm.TypeLeaderGrace) {
		t.Fatalf("the log holds %d command types, want all %d", len(types), fsm.TypeLeaderGrace)
	}
	if !bytes.Equal(direct.SnapshotBytes(), replica.SnapshotBytes()) || direct.AppliedIndex() != replica.AppliedIndex() {
		t.Fatalf("the replicas diverged")
	}
	for name := range kinds {
		if !seen[name] {
			t.Errorf("no entry gave %s", name)
		}
	}
}

// TestRaftFSMSnapshotRoundTrip: a snapshot taken through the adapter and
// persisted into a raft snapshot store after more entries were applied
// holds the state at the time it was taken, closes its sink, and restores
// through the adapter to the same bytes.
func TestRaftFSMSnapshotRoundTrip(t *testing.T) {
	log := adapterLog(2000)
	f := fsm.New()
	a := raftFSM{f: f}
	for i, b := range log[:1000] {
		a.Apply(&raft.Log{Index: uint64(i + 1), Data: b})
	}
	want := f.SnapshotBytes()
	snap, err := a.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range log[1000:] {
		a.Apply(&raft.Log{Index: uint64(1000 + i + 1), Data: b})
	}
	if bytes.Equal(f.SnapshotBytes(), want) {
		t.Fatal("the later entries changed nothing; the test shows nothing")
	}

	store := raft.NewInmemSnapshotStore()
	sink, err := store.Create(raft.SnapshotVersionMax, 1000, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	snap.Release()
	_, rc, err := store.Open(sink.ID())
	if err != nil {
		t.Fatalf("the sink was not closed: %v", err)
	}
	g := fsm.New()
	if err := (raftFSM{f: g}).Restore(rc); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if !bytes.Equal(g.SnapshotBytes(), want) {
		t.Fatalf("restored %d bytes, want the %d of the state when the snapshot was taken", len(g.SnapshotBytes()), len(want))
	}
}

// failingSink is a raft.SnapshotSink whose writes fail after limit bytes.
type failingSink struct {
	limit            int
	closed, canceled bool
}

var errSinkFull = errors.New("sink full")

func (s *failingSink) Write(p []byte) (int, error) {
	if len(p) > s.limit {
		n := s.limit
		s.limit = 0
		return n, errSinkFull
	}
	s.limit -= len(p)
	return len(p), nil
}
func (s *failingSink) ID() string    { return "failing" }
func (s *failingSink) Close() error  { s.closed = true; return nil }
func (s *failingSink) Cancel() error { s.canceled = true; return nil }

// TestRaftFSMPersistCancelsOnError: a write error cancels the sink rather
// than closing it, so that raft discards the partial snapshot.
func TestRaftFSMPersistCancelsOnError(t *testing.T) {
	f := fsm.New()
	for i, b := range adapterLog(200) {
		f.ApplyEntry(uint64(i+1), b)
	}
	snap, err := raftFSM{f: f}.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &failingSink{limit: 10}
	if err := snap.Persist(sink); !errors.Is(err, errSinkFull) {
		t.Fatalf("Persist: %v, want the sink's error", err)
	}
	if !sink.canceled || sink.closed {
		t.Fatalf("sink canceled=%v closed=%v, want canceled only", sink.canceled, sink.closed)
	}
}

// TestRaftFSMHaltedRefusesSnapshot: once the FSM halted on an entry from a
// newer version, the adapter takes no snapshot, so none records the skip.
func TestRaftFSMHaltedRefusesSnapshot(t *testing.T) {
	f := fsm.New()
	a := raftFSM{f: f}
	a.Apply(&raft.Log{Index: 1, Data: fsm.Encode(&fsm.Tick{Header: fsm.Header{Now: 1}})})
	if _, err := a.Snapshot(); err != nil {
		t.Fatalf("Snapshot before the halt: %v", err)
	}
	r := a.Apply(&raft.Log{Index: 2, Data: []byte{1, 0x7f}}).(*fsm.Result)
	if r.Code != fsm.CodeInvalid || !errors.Is(f.HaltErr(), fsm.ErrUnsupported) {
		t.Fatalf("unknown type: %+v, halt error %v", r, f.HaltErr())
	}
	if snap, err := a.Snapshot(); !errors.Is(err, fsm.ErrUnsupported) || snap != nil {
		t.Fatalf("Snapshot of a halted FSM: %v, %v; want ErrUnsupported", snap, err)
	}
}
