package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// propMaxSteps bounds the log of one property check. With -race and
// -rapid.checks=1000 the package's tests take about 50s on two cores.
const propMaxSteps = 1000

// propClients is the number of clients that send request ids; at
// Protocol2 the de-duplication table holds propMaxActive of them within
// the window, so that the third is refused until one expires.
const (
	propClients   = 3
	propMaxActive = 2
)

// propFSM returns an empty FSM whose de-duplication table holds
// propMaxActive clients within the window.
func propFSM() *FSM { return withMaxActive(New(), propMaxActive) }

// withMaxActive lowers f's de-duplication table to n clients within the
// window, as a build with a smaller DedupMaxActiveClients would, and
// returns f.
func withMaxActive(f *FSM, n int) *FSM {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.s.dedup.maxActive = n
	return f
}

// propKinds weights the commands the generator draws; the simplest comes
// first, so that rapid shrinks towards it.
var propKinds = []string{
	"get", "finish", "tick", "get", "finish", "fail", "renew", "get", "tick",
	"dataset", "part", "part", "commit", "save", "join", "join", "join", "leave",
	"grace", "node", "create", "delete", "limits", "kv", "kv", "kv",
	"kvdelete", "kvprefix", "kvadd", "kvmulti", "kvappend", "kvcompare", "protocol", "protocol",
	"retry", "retry", "reuse", "garbage", "mutate",
}

// propMutable is how many of propKinds, from the first, name a command
// that "mutate" may damage.
const propMutable = 34

// propJobs are the jobs the generator addresses: "" and DefaultJob are the
// same job.
var propJobs = []string{"", DefaultJob, "job-b"}

// propClockSteps are the leader clock's moves between entries: mostly
// forward, sometimes backwards (a new leader with a slower clock), rarely
// past every timeout and the dedup window.
var propClockSteps = []time.Duration{
	0, time.Second, time.Millisecond, 0, 2 * time.Second, time.Second, 5 * time.Second,
	-time.Second, 12 * time.Second, -20 * time.Second, 11 * time.Minute, 31 * time.Minute,
}

// propGen draws a random log entry by entry. Each entry is applied to f
// before the next is drawn, so that later commands can name the tasks f
// leased, the parts its uploads expect and its current pass.
type propGen struct {
	f     *FSM
	index uint64
	now   int64
	metas []TaskMeta // recently leased, newest last
	sent  []Command  // commands sent with a request id, for retries
	// ids and seqs are each client's current id and last sequence
	// number; minted numbers the ids a client takes once its id is
	// refused as unknown, as the clients do.
	ids    [propClients]uuid.UUID
	seqs   [propClients]uint64
	minted byte
}

func newPropGen() *propGen {
	g := &propGen{f: propFSM(), now: t0}
	for n := range g.ids {
		g.ids[n] = clientID(byte(n + 1))
	}
	return g
}

// step draws one entry and applies it to g.f.
func (g *propGen) step(t *rapid.T) ([]byte, *Result) {
	b := g.draw(t)
	g.index++
	r := g.f.ApplyEntry(g.index, b)
	if c, err := Decode(b); err == nil && r.Code == CodeUnknownClient {
		// The client continues under a new id, from sequence 1.
		if n := slices.Index(g.ids[:], c.Hdr().Request.Client); n >= 0 {
			g.minted++
			g.ids[n], g.seqs[n] = uuid.UUID{15: g.minted, 0: 0xcd}, 0
		}
	}
	if r.Task != nil && !slices.Contains(g.metas, r.Task.Meta) {
		g.metas = append(g.metas, r.Task.Meta)
		if len(g.metas) > 8 {
			g.metas = g.metas[1:]
		}
	}
	return b, r
}

func (g *propGen) draw(t *rapid.T) []byte {
	g.now = max(0, g.now+int64(rapid.SampledFrom(propClockSteps).Draw(t, "clock")))
	kind := rapid.SampledFrom(propKinds).Draw(t, "kind")
	if g.index == 0 && rapid.IntRange(0, 4).Draw(t, "startWithDataset") > 0 {
		kind = "dataset"
	}
	switch {
	case kind == "retry" && len(g.sent) > 0:
		// Half the time one of the last few, whose grants may still
		// hold, so that their replays are judged at a later time.
		sent := g.sent
		if rapid.Bool().Draw(t, "recent") {
			sent = sent[max(0, len(sent)-4):]
		}
		c := rapid.SampledFrom(sent).Draw(t, "retried")
		c.Hdr().Now = g.now
		return Encode(c)
	case kind == "reuse" && len(g.sent) > 0:
		req := rapid.SampledFrom(g.sent).Draw(t, "reused").Hdr().Request
		return Encode(&RemoveNode{ID: "n0", Header: Header{Now: g.now, Request: req}})
	case kind == "garbage":
		return modelled(supported(rapid.SliceOfN(rapid.Byte(), 0, 16).Draw(t, "garbage")))
	case kind == "mutate":
		b := g.encode(t, g.command(t, rapid.SampledFrom(propKinds[:propMutable]).Draw(t, "mutated")))
		i := rapid.IntRange(0, len(b)-1).Draw(t, "at")
		b[i] ^= rapid.Byte().Filter(func(x byte) bool { return x != 0 }).Draw(t, "xor")
		return modelled(supported(b))
	}
	return g.encode(t, g.command(t, kind))
}

// supported returns b, or a version byte in front of it when b would
// halt the FSM as an entry from a newer version: the halt has tests of its
// own, and a halted FSM has nothing left to check.
func supported(b []byte) []byte {
	if _, err := Decode(b); errors.Is(err, ErrUnsupported) {
		return append([]byte{2, byte(TypeTick)}, b...)
	}
	return b
}

// modelled returns b, or, when b is a SetLimits that bounds the state's
// size estimate, which the model does not compute, b without that bound.
// Sessions and cursors, which the model does not hold (session_test.go
// and cursor_test.go test them), become an entry that does not decode,
// once the level allows them.
func modelled(b []byte) []byte {
	if c, err := Decode(b); err == nil {
		if h := c.Hdr(); modelSince[c.Type()] >= Protocol6 || h.Session != 0 || h.Attach {
			return []byte{2}
		}
		if l, ok := c.(*SetLimits); ok && l.Limits.MaxStateBytes != 0 {
			l.Limits.MaxStateBytes = 0
			return Encode(l)
		}
	}
	return b
}

// encode stamps c with the clock and, half the time, a request id.
func (g *propGen) encode(t *rapid.T, c Command) []byte {
	h := c.Hdr()
	h.Now = g.now
	if rapid.Bool().Draw(t, "dedup") {
		n := rapid.IntRange(0, propClients-1).Draw(t, "client")
		g.seqs[n] += uint64(rapid.SampledFrom([]int{1, 1, 1, 2, 5}).Draw(t, "seqStep"))
		h.Request = RequestID{Client: g.ids[n], Seq: g.seqs[n]}
		// Mostly one token's; else none, or another token's, which a
		// client bound to the first (Protocol3) refuses.
		h.Request.Owner = rapid.SampledFrom([][16]byte{{}, {1}, {1}, {2}}).Draw(t, "owner")
		g.sent = append(g.sent, c)
	}
	return Encode(c)
}

// command draws a command of kind, addressed to one of propJobs when it
// is a job's.
func (g *propGen) command(t *rapid.T, kind string) Command {
	job := rapid.SampledFrom(propJobs).Draw(t, "job")
	c := g.jobCommand(t, kind, job)
	if lookup(c.Type()).jobScoped {
		c.Hdr().Job = job
	}
	return c
}

// upload returns upload id of job, or nil.
func (g *propGen) upload(job, id string) *upload {
	if j := g.f.s.jobs[jobName(job)]; j != nil {
		return j.uploads[id]
	}
	return nil
}

func (g *propGen) jobCommand(t *rapid.T, kind, job string) Command {
	switch kind {
	case "get":
		// Mostly without the job's number; else the job's, an earlier
		// one's, or one never given.
		var number uint64
		if j := g.f.s.jobs[jobName(job)]; j != nil {
			number = j.seq
		}
		get := &GetTask{Pass: max(-1, g.f.Pass(job)+rapid.SampledFrom([]int{0, 0, 0, 0, -1, 1}).Draw(t, "passDelta")),
			JobNumber: rapid.SampledFrom([]uint64{0, 0, 0, number, number, max(number, 2) - 1, 1 << 30}).Draw(t, "jobNumber")}
		// From Protocol9, now and then carrying a task it finished.
		if g.f.s.atLeast(Protocol9) && rapid.IntRange(0, 2).Draw(t, "finishRides") == 0 {
			get.Finished = g.meta(t)
		}
		// From Protocol10, now and then a batch: several tasks leased,
		// several finished (some twice, which is refused).
		if g.f.s.atLeast(Protocol10) && rapid.IntRange(0, 2).Draw(t, "batch") == 0 {
			get.Count = rapid.IntRange(0, 4).Draw(t, "count")
			if get.Finished.ID != 0 {
				for range rapid.IntRange(0, 3).Draw(t, "moreFinished") {
					get.MoreFinished = append(get.MoreFinished, g.meta(t))
				}
			}
		}
		return get
	case "finish":
		return &TaskFinished{Meta: g.meta(t)}
	case "fail":
		return &TaskFailed{Meta: g.meta(t)}
	case "renew":
		renew := &RenewLease{Meta: g.meta(t)}
		// From Protocol10, now and then several leases at once.
		if g.f.s.atLeast(Protocol10) && rapid.IntRange(0, 2).Draw(t, "renewBatch") == 0 {
			for range rapid.IntRange(1, 3).Draw(t, "moreRenewed") {
				renew.More = append(renew.More, g.meta(t))
			}
		}
		return renew
	case "dataset":
		return &SetDataset{Params: g.params(t), Chunks: propChunks(t, 1, 6), Patterns: propPatterns(t)}
	case "part":
		id := rapid.SampledFrom([]string{"u0", "u1"}).Draw(t, "upload")
		n := rapid.IntRange(0, 3).Draw(t, "part")
		if u := g.upload(job, id); u != nil && rapid.IntRange(0, 4).Draw(t, "inOrder") > 0 {
			n = int(u.parts)
		}
		return &DatasetPart{UploadID: id, Part: uint32(n), Chunks: propChunks(t, 0, 3)}
	case "commit":
		id := rapid.SampledFrom([]string{"u0", "u1"}).Draw(t, "upload")
		var parts, chunks uint32
		if u := g.upload(job, id); u != nil {
			parts, chunks = u.parts, uint32(u.chunks.len())
		}
		parts += uint32(rapid.SampledFrom([]int{0, 0, 0, 1}).Draw(t, "partsOff"))
		chunks += uint32(rapid.SampledFrom([]int{0, 0, 0, 1}).Draw(t, "chunksOff"))
		return &DatasetCommit{UploadID: id, Parts: parts, NumChunks: chunks, Params: g.params(t), Patterns: propPatterns(t)}
	case "save":
		return &RequestSaveModel{
			TrainerID: rapid.SampledFrom([]string{"t0", "t1", "t2"}).Draw(t, "trainer"),
			BlockDur:  rapid.SampledFrom([]time.Duration{time.Second, 5 * time.Second, 20 * time.Second}).Draw(t, "blockDur"),
		}
	case "join":
		group := rapid.IntRange(0, 1).Draw(t, "group")
		numPeers := group + 2
		if rapid.IntRange(0, 9).Draw(t, "mismatch") == 0 {
			numPeers = rapid.IntRange(1, 3).Draw(t, "numPeers")
		}
		return &Join{
			Group: fmt.Sprint("g", group), Member: memberID(byte(rapid.IntRange(1, 3).Draw(t, "member"))),
			NumPeers: numPeers, Data: rapid.SliceOfN(rapid.Byte(), 0, 3).Draw(t, "data"),
			Timeout:       rapid.SampledFrom([]time.Duration{0, 5 * time.Second, 30 * time.Second}).Draw(t, "timeout"),
			FailOnTimeout: rapid.Bool().Draw(t, "failOnTimeout"),
		}
	case "leave":
		return &Leave{
			Group:  fmt.Sprint("g", rapid.IntRange(0, 1).Draw(t, "group")),
			Member: memberID(byte(rapid.IntRange(1, 3).Draw(t, "member"))),
		}
	case "grace":
		return &LeaderGrace{Grace: rapid.SampledFrom([]time.Duration{0, time.Second, 5 * time.Second, 30 * time.Second}).Draw(t, "grace")}
	case "node":
		id := fmt.Sprint("n", rapid.IntRange(0, 2).Draw(t, "node"))
		if rapid.Bool().Draw(t, "remove") {
			return &RemoveNode{ID: id}
		}
		port := rapid.IntRange(1, 3).Draw(t, "port")
		// Without a release first, as below Protocol2; with one, which
		// only Protocol2 records.
		reg := Registration{ID: id, RaftAddr: fmt.Sprint("r:", port), APIAddr: fmt.Sprint("a:", port)}
		if rapid.Bool().Draw(t, "release") {
			reg.Version = rapid.SampledFrom([]string{"", "v1.4.0", "v1.5.0-3-gabcdef"}).Draw(t, "version")
			reg.Protocol = rapid.Uint64Range(0, Protocol).Draw(t, "nodeProtocol")
		}
		return &RegisterNode{Node: reg}
	case "create":
		return &CreateJob{}
	case "delete":
		return &DeleteJob{}
	case "limits":
		// Small limits that the generated commands reach; zero, the
		// default, first, so that rapid shrinks towards it.
		return &SetLimits{Limits: Limits{
			MaxJobs:          rapid.SampledFrom([]int{0, 1, 2}).Draw(t, "maxJobs"),
			MaxJobTasks:      rapid.SampledFrom([]int{0, 2}).Draw(t, "maxJobTasks"),
			MaxJobChunks:     rapid.SampledFrom([]int{0, 3}).Draw(t, "maxJobChunks"),
			MaxJobGroups:     rapid.SampledFrom([]int{0, 1}).Draw(t, "maxJobGroups"),
			MaxJobGroupBytes: rapid.SampledFrom([]int64{0, 4}).Draw(t, "maxJobGroupBytes"),
			JobTTL:           rapid.SampledFrom([]time.Duration{0, 30 * time.Second, 5 * time.Minute}).Draw(t, "jobTTL"),
			MaxJobKVKeys:     rapid.SampledFrom([]int{0, 2}).Draw(t, "maxJobKVKeys"),
			MaxKVValueBytes:  rapid.SampledFrom([]int64{0, 2}).Draw(t, "maxKVValueBytes"),
		}}
	case "kv":
		// Mostly the key's current version, so that writes go on; else
		// "absent", one that was or will be, or one far off.
		key := fmt.Sprint("k", rapid.IntRange(0, 2).Draw(t, "key"))
		cur := g.f.KV(job, key).Version
		version := rapid.SampledFrom([]uint64{cur, cur, cur, 0, max(cur, 1) - 1, cur + 1, 1 << 40}).Draw(t, "version")
		return &KVCompareAndSet{Key: key, Version: version, Value: rapid.SliceOfN(rapid.Byte(), 0, 3).Draw(t, "value")}
	case "kvdelete":
		// Mostly unconditional; else the key's version, or another.
		key := propKey(t)
		cur := g.f.KV(job, key).Version
		return &KVDelete{Key: key, Version: rapid.SampledFrom([]uint64{0, 0, cur, cur, max(cur, 1) - 1, cur + 1}).Draw(t, "version")}
	case "kvprefix":
		return &KVDeletePrefix{Prefix: rapid.SampledFrom([]string{"k", "k1", "k2", "z"}).Draw(t, "prefix")}
	case "kvadd":
		// Small steps; rarely one that takes the sum past 64 bits.
		return &KVAdd{Key: propKey(t), Delta: rapid.SampledFrom([]int64{1, -1, 7, 0, math.MaxInt64, math.MinInt64}).Draw(t, "delta")}
	case "kvmulti":
		// Distinct keys but for the last set, which a validator refuses.
		keys := rapid.SampledFrom([][]string{{"k0"}, {"k1", "k2"}, {"k2", "k0", "k1"}, {"k0", "k0"}}).Draw(t, "keys")
		pairs := make([]KVPair, len(keys))
		for i, key := range keys {
			pairs[i] = KVPair{Key: key, Value: propValue(t)}
		}
		return &KVMultiSet{Pairs: pairs}
	case "kvappend":
		return &KVAppend{Key: propKey(t), Value: propValue(t)}
	case "kvcompare":
		// Mostly the key's value, so that swaps go on; else nothing
		// (absent), or another.
		key := propKey(t)
		cur := g.f.KV(job, key).Value
		return &KVCompareValue{Key: key, Expected: rapid.SampledFrom([][]byte{cur, cur, nil, []byte("1"), []byte("x")}).Draw(t, "expected"),
			Desired: propValue(t)}
	case "protocol":
		// Every level this build knows, and 0, which is refused.
		return &SetProtocol{Level: rapid.Uint64Range(0, Protocol).Draw(t, "level")}
	}
	return &Tick{}
}

// propKey is one of the register keys the generator writes, which the
// model checks.
func propKey(t *rapid.T) string { return fmt.Sprint("k", rapid.IntRange(0, 2).Draw(t, "key")) }

// propValue is a value of the register's writes: mostly decimal integers,
// which KVAdd takes, of up to two bytes, which the small value limit
// allows, or three.
func propValue(t *rapid.T) []byte {
	return rapid.SampledFrom([][]byte{nil, []byte("1"), []byte("-2"), []byte("x"), []byte("12"), []byte("123")}).Draw(t, "value")
}

// meta is a recently leased task, or a random id and epoch.
func (g *propGen) meta(t *rapid.T) TaskMeta {
	if len(g.metas) > 0 && rapid.IntRange(0, 3).Draw(t, "recent") > 0 {
		// Newest first, so that rapid's bias finishes current leases.
		i := rapid.IntRange(0, len(g.metas)-1).Draw(t, "meta")
		return g.metas[len(g.metas)-1-i]
	}
	// Rarely an epoch past Protocol1's range, or of another era.
	return TaskMeta{ID: rapid.IntRange(1, 7).Draw(t, "id"),
		Epoch: rapid.SampledFrom([]int{0, 1, 2, 3, 4, 1, 2, math.MaxInt32 + 1, 1<<32 | 1}).Draw(t, "epoch")}
}

func (g *propGen) params(t *rapid.T) DatasetParams {
	return DatasetParams{
		ChunksPerTask: rapid.IntRange(1, 2).Draw(t, "chunksPerTask"),
		TaskTimeout:   rapid.SampledFrom([]time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second}).Draw(t, "taskTimeout"),
		FailureMax:    rapid.IntRange(0, 2).Draw(t, "failureMax"),
		Strict:        rapid.Bool().Draw(t, "strict"),
		// Mostly in id order with no seed, as below Protocol8; else
		// shuffled, or in id order with a seed.
		Shuffle: rapid.IntRange(0, 2).Draw(t, "shuffle") == 0,
		Seed:    rapid.SampledFrom([]uint64{0, 0, 1, 42, 1 << 63}).Draw(t, "seed"),
	}
}

// propPatterns returns the patterns of a dataset: mostly none, as a chunk
// list or a proposer below Protocol4 gives, else one or two.
func propPatterns(t *rapid.T) []string {
	return rapid.SampledFrom([][]string{nil, nil, nil, {"a/*.rio"}, {"b/*.rio", "a/*.rio"}}).Draw(t, "patterns")
}

func propChunks(t *rapid.T, lo, hi int) []Chunk {
	n := rapid.IntRange(lo, hi).Draw(t, "chunks")
	out := make([]Chunk, n)
	for i := range out {
		out[i] = Chunk{Path: fmt.Sprint("/d/", i%2), Offset: int64(i) * 100, Records: uint32(i + 1)}
	}
	return out
}

// sameResult compares everything a caller sees of a result.
func sameResult(a, b *Result) bool {
	if !sameTask(a.Task, b.Task) || len(a.More) != len(b.More) {
		return false
	}
	for i := range a.More {
		if !sameTask(a.More[i], b.More[i]) {
			return false
		}
	}
	if (a.Finish == nil) != (b.Finish == nil) || a.Finish != nil && *a.Finish != *b.Finish || !slices.Equal(a.MoreFinish, b.MoreFinish) ||
		!slices.Equal(a.Renewed, b.Renewed) {
		return false
	}
	if (a.KV == nil) != (b.KV == nil) || a.KV != nil && (a.KV.Found != b.KV.Found || a.KV.Version != b.KV.Version || !bytes.Equal(a.KV.Value, b.KV.Value)) {
		return false
	}
	if a.Deleted != b.Deleted || a.Sum != b.Sum || a.Length != b.Length || !slices.Equal(a.Versions, b.Versions) {
		return false
	}
	return a.Code == b.Code && a.Granted == b.Granted && a.Lease == b.Lease && a.Generation == b.Generation && a.Swapped == b.Swapped &&
		a.Ignored == b.Ignored && a.Duplicate == b.Duplicate && slices.Equal(a.Collected, b.Collected)
}

// sameTask reports whether two leased tasks (or none) are the same for
// the model: the fields it keeps.
func sameTask(a, b *Task) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Meta == b.Meta && slices.Equal(a.Chunks, b.Chunks) && a.Pass == b.Pass && a.Lease == b.Lease && a.JobNumber == b.JobNumber
}

// TestPropertyReplicasAgree: two replicas fed the same log give the same
// results and end with identical bytes. (raftnode's adapter test checks
// that raft's Apply reaches ApplyEntry unchanged.)
func TestPropertyReplicasAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := newPropGen()
		replica := propFSM()
		for range rapid.IntRange(propMaxSteps/4, propMaxSteps).Draw(t, "steps") {
			b, want := g.step(t)
			got := replica.ApplyEntry(g.index, b)
			if !sameResult(got, want) || got.Message != want.Message {
				t.Fatalf("entry %d: replica got %+v, want %+v", g.index, got, want)
			}
		}
		if !bytes.Equal(g.f.SnapshotBytes(), replica.SnapshotBytes()) {
			t.Fatalf("replicas diverged")
		}
		if g.f.StateHash() != replica.StateHash() || replica.AppliedIndex() != g.index {
			t.Fatalf("state hash or applied index differ")
		}
	})
}

// persistAsync takes a snapshot now and persists it in another goroutine,
// while the caller goes on applying.
func persistAsync(t *rapid.T, f *FSM) <-chan []byte {
	sn, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	ch := make(chan []byte, 1)
	go func() {
		var b bytes.Buffer
		if _, err := sn.WriteTo(&b); err != nil {
			ch <- nil
			return
		}
		ch <- b.Bytes()
	}()
	return ch
}

// TestPropertySnapshotReplay: a snapshot taken at a random point, persisted
// while the original goes on applying, restored into a fresh FSM and
// followed by the rest of the log gives the same bytes as the original.
func TestPropertySnapshotReplay(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := newPropGen()
		n := rapid.IntRange(propMaxSteps/4, propMaxSteps).Draw(t, "steps")
		at := rapid.IntRange(0, n).Draw(t, "snapshotAt")
		var rest [][]byte
		var want []byte
		var persisted <-chan []byte
		for i := 0; ; i++ {
			if i == at {
				want = g.f.SnapshotBytes()
				persisted = persistAsync(t, g.f)
			}
			if i == n {
				break
			}
			b, _ := g.step(t)
			if i >= at {
				rest = append(rest, b)
			}
		}
		b := <-persisted
		if !bytes.Equal(b, want) {
			t.Fatalf("persisted snapshot (%d bytes) is not the state at entry %d (%d bytes)", len(b), at, len(want))
		}
		f := withMaxActive(restored(t, b), propMaxActive)
		for i, e := range rest {
			f.ApplyEntry(uint64(at+i+1), e)
		}
		if !bytes.Equal(f.SnapshotBytes(), g.f.SnapshotBytes()) {
			t.Fatalf("restore at entry %d and replay diverged from replay alone", at)
		}
	})
}

// TestPropertyInvariants checks after every entry that every task is in
// exactly one queue, that none is created or lost, that pending tasks have
// deadlines, that the pass and the clock never decrease while a job
// lives, that the size estimate kept by apply is the one computed from
// scratch, and that results and queries agree with the reference model.
func TestPropertyInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := newPropGen()
		m := newModel()
		m.maxActive = propMaxActive
		prev := map[string]Stats{}
		for range rapid.IntRange(propMaxSteps/4, propMaxSteps).Draw(t, "steps") {
			before := g.f.SnapshotBytes()
			b, got := g.step(t)
			want := m.apply(b)
			if !sameResult(got, &want) {
				t.Fatalf("entry %d: got %+v, model says %+v", g.index, got, want)
			}
			if got.rejected() || got.Duplicate {
				if !bytes.Equal(before, g.f.SnapshotBytes()) {
					t.Fatalf("entry %d: a rejected or replayed command changed the state", g.index)
				}
			}
			if c, _ := Decode(b); len(got.Collected) > 0 || (got.Code == CodeOK && c != nil && c.Type() == TypeDeleteJob) {
				clear(prev) // a job deleted, and maybe created again: it starts afresh
			}
			for _, job := range propJobs[1:] {
				prev[job] = checkInvariants(t, g.f, job, prev[job])
			}
			checkEstimate(t, g.f)
			m.check(t, g.f)
		}
	})
}

// checkEstimate fails unless every job's size estimate, and the state's,
// are what estimate computes from scratch.
func checkEstimate(t interface{ Fatalf(string, ...any) }, f *FSM) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var total int64
	for _, name := range sortedKeys(f.s.jobs) {
		j := f.s.jobs[name]
		want := j.estimate()
		var data int64
		staged := 0
		for _, id := range sortedKeys(j.groups) {
			data += int64(j.groups[id].dataSize)
		}
		for _, id := range sortedKeys(j.uploads) {
			staged += j.uploads[id].chunks.len()
		}
		if j.jobBytes != want || j.groupData != data || j.staged != staged {
			t.Fatalf("job %q: estimate %d, group data %d, staged %d; from scratch %d, %d, %d",
				name, j.jobBytes, j.groupData, j.staged, want, data, staged)
		}
		total += want
	}
	if f.s.stateBytes != total {
		t.Fatalf("state estimate %d, the jobs' add up to %d", f.s.stateBytes, total)
	}
}

// checkInvariants checks the task queues of job in f against the previous
// stats and returns the new ones.
func checkInvariants(t *rapid.T, f *FSM, job string, prev Stats) Stats {
	st := f.Stats(job)
	if st.Pass < prev.Pass || st.Clock < prev.Clock {
		t.Fatalf("job %q: pass %d or clock %d went back from %d, %d", job, st.Pass, st.Clock, prev.Pass, prev.Clock)
	}
	if prev.HasDataset && (!st.HasDataset || st.Tasks != prev.Tasks) {
		t.Fatalf("job %q: tasks went from %d to %d", job, prev.Tasks, st.Tasks)
	}
	if st.HasDataset != (st.Tasks > 0) {
		t.Fatalf("job %q: dataset %v with %d tasks", job, st.HasDataset, st.Tasks)
	}
	counts := map[string]int{}
	for id := 1; id <= st.Tasks; id++ {
		ts, err := f.Task(job, id)
		if err != nil || ts.Meta.ID != id {
			t.Fatalf("job %q: Task(%d) = %+v, %v", job, id, ts, err)
		}
		counts[ts.Queue]++
		if (ts.Queue == "pending") != (ts.Deadline != 0) {
			t.Fatalf("job %q: task %d in %s with deadline %d", job, id, ts.Queue, ts.Deadline)
		}
	}
	want := map[string]int{"todo": st.Todo, "pending": st.Pending, "done": st.Done, "failed": st.Failed}
	for q, n := range want {
		if counts[q] != n {
			t.Fatalf("job %q: %d tasks in %s, stats say %d", job, counts[q], q, n)
		}
	}
	if st.Todo+st.Pending+st.Done+st.Failed != st.Tasks || len(counts) > 4 {
		t.Fatalf("job %q: queues %v do not hold the %d tasks", job, counts, st.Tasks)
	}
	return st
}
