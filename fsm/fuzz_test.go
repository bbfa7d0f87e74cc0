package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

// setupLog builds the state the fuzz targets start from: in the default
// job a staged upload, a dataset with pending, done and todo tasks, an
// open and a complete allgather group and a save-model lease; a node and
// remembered requests; a second job with a dataset, a lease and a group;
// a register key; an empty job.
func setupLog() [][]byte {
	req := func(seq uint64) Header { return Header{Now: t0, Request: RequestID{Client: clientID(1), Seq: seq}} }
	now := Header{Now: t0}
	cmds := []Command{
		&DatasetPart{Header: now, UploadID: "u", Chunks: testChunks(2)},
		&SetDataset{Header: now, Params: defaultParams, Chunks: testChunks(6)},
		&GetTask{Header: req(1)},
		&GetTask{Header: req(2)},
		&GetTask{Header: now},
		&TaskFinished{Header: now, Meta: TaskMeta{ID: 3, Epoch: 1}},
		&TaskFailed{Header: req(3), Meta: TaskMeta{ID: 2, Epoch: 1}},
		&GetTask{Header: Header{Now: t0 + int64(time.Second)}},
		&Join{Header: req(4), Group: "g", Member: memberID(1), NumPeers: 2, Data: []byte("a")},
		&Join{Header: now, Group: "done", Member: memberID(1), NumPeers: 1, Data: []byte("b")},
		&RequestSaveModel{Header: req(5), TrainerID: "t0", BlockDur: time.Minute},
		&RegisterNode{Header: now, Node: Registration{ID: "n1", RaftAddr: "r:1", APIAddr: "a:1"}},
		&SetDataset{Header: Header{Now: t0, Job: "job-b"}, Params: defaultParams, Chunks: testChunks(3)},
		&GetTask{Header: Header{Now: t0, Job: "job-b"}},
		&Join{Header: Header{Now: t0, Job: "job-b"}, Group: "g", Member: memberID(1), NumPeers: 2, Data: []byte("b")},
		&CreateJob{Header: Header{Now: t0, Job: "empty"}},
		&KVCompareAndSet{Header: Header{Now: t0, Job: "job-b"}, Key: "rdzv", Value: []byte("state")},
	}
	var log [][]byte
	for _, c := range cmds {
		log = append(log, Encode(c))
	}
	return log
}

// seedCommands holds a valid command of every type, aimed at setupLog's
// state.
func seedCommands() []Command {
	later := Header{Now: t0 + int64(time.Second)}
	seeds := []Command{
		&SetDataset{Header: later, Params: defaultParams, Chunks: testChunks(2)},
		&DatasetPart{Header: later, UploadID: "u", Part: 1, Chunks: testChunks(1)},
		&DatasetCommit{Header: later, UploadID: "u", Parts: 1, NumChunks: 2, Params: defaultParams},
		&GetTask{Header: Header{Now: t0, Request: RequestID{Client: clientID(1), Seq: 1}}},
		&GetTask{Header: later},
		&TaskFinished{Header: later, Meta: TaskMeta{ID: 1, Epoch: 1}},
		&TaskFailed{Header: later, Meta: TaskMeta{ID: 1, Epoch: 1}},
		&RenewLease{Header: later, Meta: TaskMeta{ID: 1, Epoch: 1}},
		&Tick{Header: Header{Now: t0 + int64(time.Hour)}},
		&RequestSaveModel{Header: later, TrainerID: "t1", BlockDur: time.Second},
		&Join{Header: later, Group: "g", Member: memberID(2), NumPeers: 2, Data: []byte("c")},
		&Leave{Header: later, Group: "g", Member: memberID(1)},
		&RegisterNode{Header: later, Node: Registration{ID: "n2", RaftAddr: "r:2", APIAddr: "a:2"}},
		&RemoveNode{Header: later, ID: "n1"},
		&LeaderGrace{Header: later, Grace: time.Minute},
		&CreateJob{Header: Header{Now: t0 + int64(time.Second), Job: "job-c"}},
		&DeleteJob{Header: Header{Now: t0 + int64(time.Second), Job: "job-b"}},
		&SetLimits{Header: later, Limits: Limits{MaxJobs: 3, MaxJobGroups: 1, JobTTL: time.Minute}},
		&GetTask{Header: Header{Now: t0 + int64(time.Second), Job: "job-b"}},
		&Join{Header: Header{Now: t0 + int64(time.Second), Job: "job-b"}, Group: "g", Member: memberID(2), NumPeers: 2, Data: []byte("c")},
		&KVCompareAndSet{Header: Header{Now: t0 + int64(time.Second), Job: "job-b", Request: RequestID{Client: clientID(2), Seq: 1}},
			Key: "rdzv", Version: 1, Value: []byte("next")},
		&SetProtocol{Header: later, Level: Protocol},
	}
	// The register's writes of Protocol5, which TestSeedCommandsCoverEveryType
	// applies once the state is at that level.
	kv := func(seq uint64) Header {
		return Header{Now: t0 + int64(time.Second), Job: "job-b", Request: RequestID{Client: clientID(3), Seq: seq}}
	}
	return append(seeds,
		&KVDelete{Header: kv(1), Key: "rdzv", Version: 1},
		&KVDeletePrefix{Header: kv(2), Prefix: "rd"},
		&KVAdd{Header: kv(3), Key: "count", Delta: -3},
		&KVMultiSet{Header: kv(4), Pairs: []KVPair{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte{}}}},
		&KVAppend{Header: kv(5), Key: "rdzv", Value: []byte("+1")},
		&KVCompareValue{Header: kv(6), Key: "rdzv", Expected: []byte("state"), Desired: []byte("next")},
		// Sessions, of Protocol6: session 1 is the one the open makes.
		&OpenSession{Header: Header{Now: t0 + int64(time.Second), Request: RequestID{Client: clientID(5), Seq: 1}}, TTL: 5 * time.Second},
		&CheckpointSessions{Header: later, IDs: []uint64{1}},
		&ExpireSessions{Header: later, IDs: []uint64{1, 2}},
		&CloseSession{Header: Header{Now: t0 + int64(time.Second), Request: RequestID{Client: clientID(5), Seq: 2}}, ID: 1},
		// Cursors, of Protocol7.
		&ReportProgress{Header: later, Progress: []TaskProgress{{Meta: TaskMeta{ID: 1, Epoch: 1}, Consumed: 1}}},
		&CommitCursor{Header: later, Step: 7, Progress: []TaskProgress{{Meta: TaskMeta{ID: 2, Epoch: 1}, Consumed: 2}}, TrainerID: "t", Generation: 1},
		&RestoreCursor{Header: later, ID: 1},
		&DeleteCursor{Header: later, ID: 1},
		// Mixtures, of Protocol9.
		&SetWeights{Header: Header{Now: later.Now, Job: "mixed"}, Weights: []SourceWeight{{Name: "b", Weight: 3}}},
		&SetWeights{Header: Header{Now: later.Now, Job: "mixed"}, ReplaceSchedule: true,
			Schedule: []WeightStep{{AtRecords: 1000, Weights: []SourceWeight{{Name: "a", Weight: 0}}}}},
	)
}

// setupLogAt is setupLog followed by a SetProtocol to level and one of
// each of the register's writes of Protocol5 with a request id, so that
// the de-duplication table holds their outcomes, when level allows them.
func setupLogAt(level uint64) [][]byte {
	log := append(setupLog(), Encode(&SetProtocol{Header: Header{Now: t0}, Level: level}))
	if level < Protocol5 {
		return log
	}
	req := func(seq uint64) Header { return Header{Now: t0, Request: RequestID{Client: clientID(4), Seq: seq}} }
	for _, c := range []Command{
		&KVAdd{Header: req(1), Key: "count", Delta: 41},
		&KVAppend{Header: req(2), Key: "log", Value: []byte("a")},
		&KVMultiSet{Header: req(3), Pairs: []KVPair{{Key: "x/1", Value: []byte("1")}, {Key: "x/2", Value: []byte("2")}}},
		&KVDelete{Header: req(4), Key: "x/1"},
		&KVDeletePrefix{Header: req(5), Prefix: "x/"},
		&KVCompareValue{Header: req(6), Key: "count", Expected: []byte("41"), Desired: []byte("42")},
	} {
		log = append(log, Encode(c))
	}
	if level < Protocol6 {
		return log
	}
	// A session that holds a task, a key and the save-model lease, and
	// one that ends.
	under := func(seq uint64) Header {
		return Header{Now: t0, Request: RequestID{Client: clientID(8), Seq: seq}, Session: 1}
	}
	for _, c := range []Command{
		&OpenSession{Header: Header{Now: t0, Request: RequestID{Client: clientID(7), Seq: 1}}, TTL: 5 * time.Second},
		&OpenSession{Header: Header{Now: t0, Request: RequestID{Client: clientID(7), Seq: 2}}, TTL: 3 * time.Second},
		&GetTask{Header: under(1)},
		&KVCompareAndSet{Header: Header{Now: t0, Request: RequestID{Client: clientID(8), Seq: 2}, Session: 1, Attach: true}, Key: "rdzv/1", Value: []byte("v")},
		&RequestSaveModel{Header: under(3), TrainerID: "t-s", BlockDur: time.Minute},
		&CheckpointSessions{Header: Header{Now: t0}, IDs: []uint64{1, 2}},
		&ExpireSessions{Header: Header{Now: t0}, IDs: []uint64{2}},
	} {
		log = append(log, Encode(c))
	}
	if level < Protocol7 {
		return log
	}
	// A task partly consumed, two cursors, a restore and a delete, each
	// remembered for its retries.
	cur := func(seq uint64) Header { return Header{Now: t0, Request: RequestID{Client: clientID(9), Seq: seq}} }
	for _, c := range []Command{
		&GetTask{Header: cur(1)},
		&ReportProgress{Header: cur(2), Progress: []TaskProgress{{Meta: TaskMeta{ID: 2, Epoch: 1}, Consumed: 1}}},
		&CommitCursor{Header: cur(3), Step: 10},
		&CommitCursor{Header: cur(4), Step: 20, TrainerID: "t-s"},
		&RestoreCursor{Header: cur(5), ID: 1},
		&DeleteCursor{Header: cur(6), ID: 2},
		&CommitCursor{Header: cur(7), Step: 30, Generation: 2},
	} {
		log = append(log, Encode(c))
	}
	if level < Protocol8 {
		return log
	}
	// A job whose dataset shuffles, one task of it leased.
	shuffled := defaultParams
	shuffled.Shuffle, shuffled.Seed = true, 31
	for _, c := range []Command{
		&SetDataset{Header: Header{Now: t0, Job: "shuffled"}, Params: shuffled, Chunks: testChunks(5), Patterns: []string{"s/*"}},
		&GetTask{Header: Header{Now: t0, Job: "shuffled"}},
	} {
		log = append(log, Encode(c))
	}
	if level < Protocol9 {
		return log
	}
	// A mixture of two sources, two tasks leased and one finished, and a
	// schedule.
	mixed := shuffled
	mixed.Sources = []Source{{Name: "a", Weight: 2, Chunks: 3, Patterns: []string{"a/*"}}, {Name: "b", Weight: 1, Chunks: 2}}
	for _, c := range []Command{
		&SetDataset{Header: Header{Now: t0, Job: "mixed"}, Params: mixed, Chunks: testChunks(5)},
		&GetTask{Header: Header{Now: t0, Job: "mixed"}},
		&GetTask{Header: Header{Now: t0, Job: "mixed"}},
		&TaskFinished{Header: Header{Now: t0, Job: "mixed"}, Meta: TaskMeta{ID: 4, Epoch: 1}},
		// A GetTask that finishes the task before, remembered with its
		// finish's outcome.
		&GetTask{Header: Header{Now: t0, Job: "mixed", Request: RequestID{Client: clientID(10), Seq: 1}}, Finished: TaskMeta{ID: 1, Epoch: 1}},
		&SetWeights{Header: Header{Now: t0, Job: "mixed"}, ReplaceSchedule: true,
			Schedule: []WeightStep{{AtRecords: 500, Weights: []SourceWeight{{Name: "b", Weight: 5}}}}},
	} {
		log = append(log, Encode(c))
	}
	if level < Protocol10 {
		return log
	}
	// A batch that finishes two tasks and leases three, remembered with
	// every lease and outcome.
	log = append(log, Encode(&GetTask{Header: Header{Now: t0, Job: "mixed", Request: RequestID{Client: clientID(10), Seq: 2}},
		Count: 3, Finished: TaskMeta{ID: 2, Epoch: 1}, MoreFinished: []TaskMeta{{ID: 5, Epoch: 1}}}))
	return log
}

// applyLog applies log to a fresh FSM.
func applyLog(log [][]byte) *FSM {
	f := New()
	for i, b := range log {
		f.ApplyEntry(uint64(i+1), b)
	}
	return f
}

// FuzzApply applies one arbitrary entry to a loaded FSM. It must not
// panic; an invalid entry must change nothing; an entry with a request id
// applied a second time must change nothing; and the state must survive a
// snapshot round trip and a later Tick.
func FuzzApply(f *testing.F) {
	for _, c := range seedCommands() {
		f.Add(Encode(c))
	}
	f.Add([]byte{commandVersion, byte(IgnorableFlag | 1)})
	f.Add(Encode(&GetTask{Header: Header{Now: t0, Job: "job-b"}, JobNumber: 2})) // invalid below Protocol2
	// Patterns are invalid below Protocol4.
	f.Add(Encode(&SetDataset{Header: Header{Now: t0, Job: "empty"}, Params: defaultParams, Chunks: testChunks(2), Patterns: []string{"data/*.rio"}}))
	f.Add(Encode(&DatasetCommit{Header: Header{Now: t0}, UploadID: "u", Parts: 1, NumChunks: 2, Params: defaultParams, Patterns: []string{"u/*"}}))
	// A finish riding a GetTask is invalid below Protocol9.
	f.Add(Encode(&GetTask{Header: Header{Now: t0}, Finished: TaskMeta{ID: 1, Epoch: 1}}))
	// A batch is invalid below Protocol10.
	f.Add(Encode(&GetTask{Header: Header{Now: t0}, Count: 2, Finished: TaskMeta{ID: 1, Epoch: 1}, MoreFinished: []TaskMeta{{ID: 2, Epoch: 1}}}))
	// A seed and shuffle are invalid below Protocol8.
	f.Add(Encode(&SetDataset{Header: Header{Now: t0, Job: "empty"}, Params: DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Second, Shuffle: true, Seed: 5}, Chunks: testChunks(2)}))
	log := setupLog()
	base := applyLog(log).SnapshotBytes()
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := Decode(b); errors.Is(err, ErrUnsupported) {
			return // it halts the FSM, which TestInvalidCommands covers
		}
		fsm := restored(t, base)
		r := fsm.ApplyEntry(uint64(len(log)+1), b)
		if r.Code >= numCodes || (r.rejected() && r.Message == "") {
			t.Fatalf("bad result %+v", r)
		}
		after := fsm.SnapshotBytes()
		if r.rejected() && !bytes.Equal(after, base) {
			t.Fatalf("rejected entry (%s) changed the state", r.Message)
		}
		checkEstimate(t, fsm)
		if c, err := Decode(b); err == nil && !c.Hdr().Request.IsZero() && !r.rejected() {
			again := fsm.ApplyEntry(uint64(len(log)+2), b)
			if !again.Duplicate || again.Code != r.Code || !bytes.Equal(after, fsm.SnapshotBytes()) {
				t.Fatalf("replayed entry: %+v after %+v", again, r)
			}
		}
		checkRoundTrip(t, fsm)
		fsm.ApplyEntry(uint64(len(log)+3), Encode(&Tick{Header: Header{Now: t0 + int64(24*time.Hour)}}))
	})
}

// FuzzRestore restores arbitrary bytes. It must not panic, and a snapshot
// it accepts must hold every task in one queue, re-encode to a snapshot
// that restores to the same bytes, and take further commands.
func FuzzRestore(f *testing.F) {
	f.Add(New().SnapshotBytes())
	log := setupLog()
	f.Add(applyLog(log[:1]).SnapshotBytes())
	f.Add(applyLog(log).SnapshotBytes())
	f.Add(applyLog(append(log[:len(log):len(log)], Encode(&SetProtocol{Header: Header{Now: t0}, Level: Protocol4}),
		Encode(&SetDataset{Header: Header{Now: t0, Job: "empty"}, Params: defaultParams, Chunks: testChunks(2), Patterns: []string{"a/*", "b/*"}}),
	)).SnapshotBytes())
	f.Add(applyLog(setupLogAt(Protocol5)).SnapshotBytes())
	f.Add(applyLog(setupLogAt(Protocol8)).SnapshotBytes())
	f.Add(applyLog(setupLogAt(Protocol9)).SnapshotBytes())
	f.Add(applyLog(setupLogAt(Protocol10)).SnapshotBytes())
	f.Add([]byte(snapshotMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		fsm := New()
		if fsm.Restore(readCloser(b)) != nil {
			return
		}
		for _, j := range fsm.Jobs() {
			st := fsm.Stats(j.Name)
			if st.Todo+st.Pending+st.Done+st.Failed != st.Tasks || st.HasDataset != (st.Tasks > 0) {
				t.Fatalf("restored queues do not hold the tasks: %+v", st)
			}
		}
		checkEstimate(t, fsm)
		checkRoundTrip(t, fsm)
		for i, c := range seedCommands() {
			c.Hdr().Now = max(c.Hdr().Now, fsm.Clock())
			fsm.ApplyEntry(uint64(i+1), Encode(c))
		}
		fsm.ApplyEntry(100, Encode(&Tick{Header: Header{Now: maxNow}}))
		checkRoundTrip(t, fsm)
	})
}

// FuzzDecode decodes arbitrary bytes. It must not panic, and a command it
// accepts must survive an Encode and Decode round trip.
func FuzzDecode(f *testing.F) {
	for _, c := range seedCommands() {
		f.Add(Encode(c))
	}
	f.Add(Encode(&SetDataset{Header: Header{Now: t0}, Params: defaultParams, Chunks: testChunks(1), Patterns: []string{"*"}}))
	f.Add(Encode(&DatasetCommit{Header: Header{Now: t0}, UploadID: "u", Parts: 1, NumChunks: 1, Params: defaultParams, Patterns: []string{"*"}}))
	f.Add(Encode(&SetDataset{Header: Header{Now: t0}, Params: DatasetParams{ChunksPerTask: 1, Shuffle: true, Seed: 1 << 40}, Chunks: testChunks(1)}))
	f.Add(Encode(&DatasetCommit{Header: Header{Now: t0}, UploadID: "u", Parts: 1, NumChunks: 1, Params: DatasetParams{ChunksPerTask: 1, Seed: 3}, Patterns: []string{"*"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Decode(b)
		if err != nil {
			return
		}
		c2, err := Decode(Encode(c))
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip of %+v gave %+v, %v", c, c2, err)
		}
	})
}
