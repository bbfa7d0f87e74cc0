package fsm

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestInvalidCommands(t *testing.T) {
	valid := Encode(&Tick{Header: Header{Now: t0}})
	long := string(make([]byte, MaxIDLen+1))
	cases := []struct {
		name string
		cmd  Command
	}{
		{"negative now", &Tick{Header: Header{Now: -1}}},
		{"now too far ahead", &Tick{Header: Header{Now: maxNow + 1}}},
		{"dataset without chunks", &SetDataset{Params: defaultParams}},
		{"chunksPerTask 0", &SetDataset{Params: withParams(func(p *DatasetParams) { p.ChunksPerTask = 0 }), Chunks: testChunks(1)}},
		{"task timeout 0", &SetDataset{Params: withParams(func(p *DatasetParams) { p.TaskTimeout = 0 }), Chunks: testChunks(1)}},
		{"task timeout too long", &SetDataset{Params: withParams(func(p *DatasetParams) { p.TaskTimeout = MaxTaskTimeout + 1 }), Chunks: testChunks(1)}},
		{"negative failureMax", &SetDataset{Params: withParams(func(p *DatasetParams) { p.FailureMax = -1 }), Chunks: testChunks(1)}},
		{"failureMax too large", &SetDataset{Params: withParams(func(p *DatasetParams) { p.FailureMax = MaxFailureMax + 1 }), Chunks: testChunks(1)}},
		{"empty chunk path", &SetDataset{Params: defaultParams, Chunks: []Chunk{{Offset: 1}}}},
		{"chunk path too long", &SetDataset{Params: defaultParams, Chunks: []Chunk{{Path: string(make([]byte, MaxPathLen+1))}}}},
		{"negative chunk offset", &SetDataset{Params: defaultParams, Chunks: []Chunk{{Path: "p", Offset: -1}}}},
		{"part without upload id", &DatasetPart{Chunks: testChunks(1)}},
		{"part with long upload id", &DatasetPart{UploadID: long}},
		{"part with bad chunk", &DatasetPart{UploadID: "u", Chunks: []Chunk{{Path: ""}}}},
		{"commit without upload id", &DatasetCommit{Params: defaultParams}},
		{"commit with bad params", &DatasetCommit{UploadID: "u", Params: DatasetParams{}}},
		{"negative pass", &GetTask{Pass: -1}},
		{"finish task 0", &TaskFinished{Meta: TaskMeta{ID: 0, Epoch: 1}}},
		{"finish negative epoch", &TaskFinished{Meta: TaskMeta{ID: 1, Epoch: -1}}},
		{"fail task 0", &TaskFailed{Meta: TaskMeta{ID: 0}}},
		{"renew negative id", &RenewLease{Meta: TaskMeta{ID: -4}}},
		{"save without trainer", &RequestSaveModel{BlockDur: time.Second}},
		{"save for no time", &RequestSaveModel{TrainerID: "t"}},
		{"save for too long", &RequestSaveModel{TrainerID: "t", BlockDur: MaxBlockDur + 1}},
		{"join without group", &Join{Member: memberID(1), NumPeers: 1}},
		{"join with nil member", &Join{Group: "g", NumPeers: 1}},
		{"join with 0 peers", &Join{Group: "g", Member: memberID(1)}},
		{"join with too many peers", &Join{Group: "g", Member: memberID(1), NumPeers: MaxPeers + 1}},
		{"join with too much data", &Join{Group: "g", Member: memberID(1), NumPeers: 1, Data: make([]byte, MaxMemberData+1)}},
		{"join with negative timeout", &Join{Group: "g", Member: memberID(1), NumPeers: 1, Timeout: -1}},
		{"join with long timeout", &Join{Group: "g", Member: memberID(1), NumPeers: 1, Timeout: MaxGroupTimeout + 1}},
		{"leave without group", &Leave{Member: memberID(1)}},
		{"register without id", &RegisterNode{Node: Registration{RaftAddr: "a"}}},
		{"register long address", &RegisterNode{Node: Registration{ID: "n", APIAddr: long}}},
		{"remove without id", &RemoveNode{}},
		{"negative grace", &LeaderGrace{Grace: -1}},
		{"grace too long", &LeaderGrace{Grace: MaxGrace + 1}},
	}
	raw := []struct {
		name string
		b    []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"version only", []byte{commandVersion}},
		{"trailing byte", append(append([]byte{}, valid...), 0)},
		{"truncated", valid[:len(valid)-1]},
		{"huge length", hugeLength()},
		{"bad bool", badParamsBool()},
		{"path index out of range", badPathIndex()},
		{"integer out of range", outOfRangeInt()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := loadedHarness(t)
			if tc.cmd.Hdr().Now == 0 {
				tc.cmd.Hdr().Now = h.now
			}
			h.invalid(Encode(tc.cmd))
		})
	}
	for _, tc := range raw {
		t.Run(tc.name, func(t *testing.T) {
			loadedHarness(t).invalid(tc.b)
		})
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"newer version", append([]byte{commandVersion + 1}, valid[1:]...)},
		{"unknown type", []byte{commandVersion, byte(numTypes), 0, 0}},
		{"type 0", append([]byte{commandVersion, 0}, valid[2:]...)},
	} {
		t.Run(tc.name+" halts", func(t *testing.T) {
			f := New()
			h := &harness{t: t, f: f, now: t0}
			h.setDataset(2, defaultParams)
			before := f.SnapshotBytes()
			applied := f.AppliedIndex()
			r := h.applyBytes(tc.b)
			if !errors.Is(r.Err(), ErrInvalid) || !errors.Is(f.HaltErr(), ErrUnsupported) {
				t.Fatalf("got %+v, halt error %v; want the FSM halted with ErrUnsupported", r, f.HaltErr())
			}
			select {
			case <-f.Halted():
			default:
				t.Fatalf("Halted not closed")
			}
			// Nothing later is applied, and no snapshot records the skip.
			h.apply(&GetTask{Pass: 0})
			if !bytes.Equal(before, f.SnapshotBytes()) || f.AppliedIndex() != applied {
				t.Fatalf("a halted FSM changed its state or applied index")
			}
			if _, err := f.Snapshot(); !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Snapshot of a halted FSM: %v, want ErrUnsupported", err)
			}
		})
	}
	t.Run("unknown ignorable type", func(t *testing.T) {
		h := loadedHarness(t)
		before := h.f.SnapshotBytes()
		r := h.applyBytes([]byte{commandVersion, byte(IgnorableFlag | 0x7f), 1, 2, 3})
		if !r.Ignored || r.Err() != nil {
			t.Fatalf("got %+v, want ignored", r)
		}
		if !bytes.Equal(before, h.f.SnapshotBytes()) {
			t.Fatalf("ignored command changed the state")
		}
		if h.f.AppliedIndex() != h.index {
			t.Fatalf("applied index %d, want %d", h.f.AppliedIndex(), h.index)
		}
	})
}

// loadedHarness returns a harness whose FSM holds a dataset, a pending
// task, a staged upload, an open group, a save-model lease, a node and a
// de-duplicated request.
func loadedHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	h.setDataset(4, defaultParams)
	h.ok(withRequest(&GetTask{Pass: 0}, 1, 1))
	h.ok(&Join{Group: "g", Member: memberID(1), NumPeers: 2, Data: []byte("x")})
	h.requestSave("trainer-0", time.Minute)
	h.ok(&RegisterNode{Node: Registration{ID: "n1", RaftAddr: "r:1", APIAddr: "a:1"}})
	return h
}

func badParamsBool() []byte {
	b := Encode(&DatasetCommit{UploadID: "u", Params: defaultParams, Header: Header{Now: t0}})
	b[len(b)-1] = 2 // Strict
	return b
}

func badPathIndex() []byte {
	b := Encode(&SetDataset{Params: defaultParams, Chunks: testChunks(1), Header: Header{Now: t0}})
	// The chunk triple is the last three bytes: path index, offset, records.
	b[len(b)-3] = 1
	return b
}

// header returns the encoding of a command's version, type and header.
func header(t CmdType) *encoder {
	e := &encoder{}
	e.byte(commandVersion)
	e.byte(byte(t))
	e.varint(t0)
	e.uuid(clientID(0))
	e.uvarint(0)
	e.string("") // the job
	return e
}

func hugeLength() []byte {
	e := header(TypeLeave)
	e.uvarint(1 << 40)
	e.raw([]byte("g"))
	return e.buf
}

func outOfRangeInt() []byte {
	e := header(TypeGetTask)
	e.varint(1 << 40)
	return e.buf
}

func TestResultErr(t *testing.T) {
	for c := Code(0); c < numCodes; c++ {
		r := &Result{Code: c}
		if err := r.Err(); !errors.Is(err, c.Err()) || CodeOf(err) != c {
			t.Errorf("code %v: Err() = %v", c, err)
		}
		if got, ok := ParseCode(c.String()); !ok || got != c {
			t.Errorf("ParseCode(%q) = %v %v", c.String(), got, ok)
		}
	}
	r := &Result{Code: CodeInvalid, Message: "bad"}
	if err := r.Err(); !errors.Is(err, ErrInvalid) || err.Error() != "invalid command: bad" {
		t.Errorf("invalid result error %q", r.Err())
	}
	if !errors.Is(Code(200).Err(), ErrInvalid) || Code(200).String() != "code_200" {
		t.Errorf("unknown code not invalid")
	}
	if _, ok := ParseCode("nope"); ok {
		t.Errorf("ParseCode accepted an unknown name")
	}
}
