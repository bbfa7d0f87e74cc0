package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestPermutationIsABijection: the permutation of every seed and pass is
// one of [0, n), for sizes around the powers of two, primes and large n.
func TestPermutationIsABijection(t *testing.T) {
	sizes := []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 32, 33, 64, 97, 127, 128, 129, 255, 256,
		1000, 1021, 1024, 4096, 4099, 10_000, 10_007, 65_536, 65_537}
	for _, n := range sizes {
		for _, seed := range []uint64{0, 1, 2, 1 << 63, 0xdeadbeef} {
			for _, pass := range []int{0, 1, 7} {
				p := newPermutation(seed, pass, n)
				seen := make([]bool, n)
				for k := range uint64(n) {
					x := p.at(k)
					if x >= uint64(n) || seen[x] {
						t.Fatalf("n %d seed %d pass %d: position %d gives %d, out of range or repeated", n, seed, pass, k, x)
					}
					seen[x] = true
				}
			}
		}
	}
}

// TestPermutationIsStable: the permutation is a function of (seed, pass,
// n) alone, which every replica of every release must compute alike: it
// decides the state. The pinned orders fail the test if the function
// changes, which would need a new protocol level.
func TestPermutationIsStable(t *testing.T) {
	for _, c := range []struct {
		seed       uint64
		pass, n    int
		wantPrefix []int
	}{
		{1, 0, 100, pinnedOrder1},
		{42, 3, 10, pinnedOrder42},
	} {
		got := PassOrder(c.seed, true, c.pass, c.n)
		if !slices.Equal(got, PassOrder(c.seed, true, c.pass, c.n)) {
			t.Fatalf("seed %d pass %d: two calls disagree", c.seed, c.pass)
		}
		if !slices.Equal(got[:len(c.wantPrefix)], c.wantPrefix) {
			t.Fatalf("seed %d pass %d n %d: order starts %v, want %v", c.seed, c.pass, c.n, got[:len(c.wantPrefix)], c.wantPrefix)
		}
	}
	a, b, c := PassOrder(7, true, 0, 1000), PassOrder(7, true, 1, 1000), PassOrder(8, true, 0, 1000)
	if slices.Equal(a, b) || slices.Equal(a, c) {
		t.Fatal("another pass or another seed gives the same order")
	}
	if got := PassOrder(7, false, 3, 5); !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("without shuffle: %v, want id order", got)
	}
}

var (
	pinnedOrder1  = []int{38, 42, 15, 2, 39, 93, 75, 18, 57, 43}
	pinnedOrder42 = []int{2, 1, 3, 8, 5, 6, 4, 7, 10, 9}
)

// spearman returns the Spearman rank correlation of two orders of the
// same n ids: the Pearson correlation of each id's positions in them.
func spearman(a, b []int) float64 {
	n := len(a)
	posA := make([]int, n+1)
	posB := make([]int, n+1)
	for i := range n {
		posA[a[i]] = i
		posB[b[i]] = i
	}
	var d2 float64
	for id := 1; id <= n; id++ {
		d := float64(posA[id] - posB[id])
		d2 += d * d
	}
	nf := float64(n)
	return 1 - 6*d2/(nf*(nf*nf-1))
}

// TestShuffleDecorrelatesPasses: over 10,000 tasks, for seeds 1 to 5, the
// Spearman rank correlation between consecutive passes, and against id
// order, is within 0.04 of zero (its standard deviation for independent
// orders is 0.01).
func TestShuffleDecorrelatesPasses(t *testing.T) {
	const n = 10_000
	ids := PassOrder(0, false, 0, n)
	reversed := slices.Clone(ids)
	slices.Reverse(reversed)
	if rho := spearman(ids, reversed); rho > -0.999 {
		t.Fatalf("spearman of an order and its reverse is %f, want -1", rho)
	}
	for seed := uint64(1); seed <= 5; seed++ {
		prev := PassOrder(seed, true, 0, n)
		for pass := 0; pass < 4; pass++ {
			order := prev
			if pass > 0 {
				order = PassOrder(seed, true, pass, n)
				if rho := spearman(prev, order); rho < -0.04 || rho > 0.04 {
					t.Errorf("seed %d: passes %d and %d have rank correlation %.4f", seed, pass-1, pass, rho)
				}
			}
			if rho := spearman(ids, order); rho < -0.04 || rho > 0.04 {
				t.Errorf("seed %d pass %d: rank correlation %.4f with id order", seed, pass, rho)
			}
			prev = order
		}
	}
}

// shuffleHarness returns a harness at Protocol8 with a dataset of n
// one-chunk tasks that shuffles with seed.
func shuffleHarness(t *testing.T, n int, seed uint64, shuffle bool) *harness {
	t.Helper()
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol8})
	p := defaultParams
	p.Seed, p.Shuffle, p.FailureMax = seed, shuffle, 1000
	h.ok(&SetDataset{Params: p, Chunks: testChunks(n)})
	return h
}

// firstDispatches runs a job of n tasks through passes passes with
// trainers trainers, faults drawn from faultSeed (failures, trainers that
// drop their task and let its lease run out, late finishes of expired
// leases), and returns, for each pass, the task ids in the order of their
// first dispatch in it.
func firstDispatches(t *testing.T, n int, seed uint64, trainers, passes int, faultSeed uint64) [][]int {
	t.Helper()
	h := shuffleHarness(t, n, seed, true)
	rng := rand.New(rand.NewPCG(faultSeed, 0))
	held := make([]*TaskMeta, trainers)
	dispatches, failures := 0, 0
	var stale []TaskMeta // leases dropped by their trainers
	orders := make([][]int, passes)
	seen := make([]map[int]bool, passes)
	for p := range seen {
		seen[p] = make(map[int]bool)
	}
	for steps := 0; h.f.Pass(DefaultJob) < passes; steps++ {
		if steps > 100_000 {
			t.Fatal("the job made no progress")
		}
		k := rng.IntN(trainers)
		if held[k] == nil {
			r := h.apply(&GetTask{Pass: h.f.Pass(DefaultJob)})
			switch {
			case r.Task != nil:
				dispatches++
				m := r.Task.Meta
				held[k] = &m
				if p := r.Task.Pass; !seen[p][m.ID] {
					seen[p][m.ID] = true
					orders[p] = append(orders[p], m.ID)
				}
			case errors.Is(r.Err(), ErrNoMoreAvailable):
				// Every task is out: let the dropped leases run out.
				h.advance(defaultParams.TaskTimeout + time.Second)
				h.tick()
			default:
				t.Fatalf("GetTask: %v", r.Err())
			}
			continue
		}
		m := *held[k]
		switch x := rng.IntN(20); {
		case x < 2:
			h.apply(&TaskFailed{Meta: m})
			held[k] = nil
			failures++
		case x < 4:
			stale = append(stale, m) // the trainer dies with its task
			held[k] = nil
		case x < 5 && len(stale) > 0:
			// A trainer thought dead finishes late; counted or ignored.
			h.apply(&TaskFinished{Meta: stale[0]})
			stale = stale[1:]
		case x < 6:
			h.apply(&RenewLease{Meta: m})
		default:
			h.apply(&TaskFinished{Meta: m})
			held[k] = nil
		}
		if rng.IntN(50) == 0 {
			h.advance(time.Second)
			h.tick()
		}
	}
	// The faults happened: tasks were dispatched again after failures
	// and after their leases ran out.
	if expired := h.f.LeasesExpired(DefaultJob); dispatches <= n*passes || failures == 0 || expired == 0 {
		t.Fatalf("%d trainers: %d dispatches of %d tasks in %d passes, %d failures, %d leases expired: too few faults",
			trainers, dispatches, n, passes, failures, expired)
	}
	t.Logf("%d trainers: %d dispatches, %d failures, %d leases expired", trainers, dispatches, failures, h.f.LeasesExpired(DefaultJob))
	return orders
}

// hashOrder is a hash of an order of ids.
func hashOrder(ids []int) [32]byte {
	b := make([]byte, 0, 8*len(ids))
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint64(b, uint64(id))
	}
	return sha256.Sum256(b)
}

// TestFirstDispatchOrderIgnoresTrainersAndFaults: with the same seed, a
// job read by 2 trainers and one read by 8, with different failures,
// timeouts and late finishes, first dispatch every pass's tasks in the
// same order, the permutation of (seed, pass).
func TestFirstDispatchOrderIgnoresTrainersAndFaults(t *testing.T) {
	const n, seed, passes = 64, 1234, 4
	a := firstDispatches(t, n, seed, 2, passes, 1)
	b := firstDispatches(t, n, seed, 8, passes, 2)
	for p := range passes {
		if len(a[p]) != n || len(b[p]) != n {
			t.Fatalf("pass %d: %d and %d tasks first dispatched, want %d", p, len(a[p]), len(b[p]), n)
		}
		if hashOrder(a[p]) != hashOrder(b[p]) {
			t.Fatalf("pass %d: 2 trainers dispatched %v first, 8 trainers %v", p, a[p], b[p])
		}
		if want := PassOrder(seed, true, p, n); !slices.Equal(a[p], want) {
			t.Fatalf("pass %d: first dispatched %v, want the permutation %v", p, a[p], want)
		}
	}
	if slices.Equal(a[0], a[1]) {
		t.Fatal("two passes in the same order")
	}
}

// TestShuffleFalseKeepsIDOrder: without shuffle every pass is dispatched
// in id order, whatever the seed; the seed is recorded all the same.
func TestShuffleFalseKeepsIDOrder(t *testing.T) {
	h := shuffleHarness(t, 5, 99, false)
	for pass := range 2 {
		var got []int
		for range 5 {
			m := h.getTask(pass)
			got = append(got, m.ID)
			h.finish(m)
		}
		if !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
			t.Fatalf("pass %d dispatched %v, want id order", pass, got)
		}
	}
	if d, _ := h.f.Dataset(DefaultJob, 0); d.Params.Seed != 99 || d.Params.Shuffle {
		t.Fatalf("dataset params %+v, want seed 99 in id order", d.Params)
	}
}

// TestShuffleRetriesGoLast: a task that fails or whose lease runs out goes
// to the end of todo, as in id order; the others keep the permutation.
func TestShuffleRetriesGoLast(t *testing.T) {
	const seed = 5
	h := shuffleHarness(t, 6, seed, true)
	want := PassOrder(seed, true, 0, 6)
	first := h.getTask(0)
	if first.ID != want[0] {
		t.Fatalf("first task %d, want %d", first.ID, want[0])
	}
	h.fail(first)
	var got []int
	for range 6 {
		m := h.getTask(0)
		got = append(got, m.ID)
		h.finish(m)
	}
	if wantNext := append(slices.Clone(want[1:]), want[0]); !slices.Equal(got, wantNext) {
		t.Fatalf("after a failure: %v, want %v", got, wantNext)
	}
	if got := h.getTask(1); got.ID != PassOrder(seed, true, 1, 6)[0] {
		t.Fatalf("pass 1 starts with task %d, want %d", got.ID, PassOrder(seed, true, 1, 6)[0])
	}
}

// TestShuffleInParts: a dataset committed from parts shuffles as one set
// in one entry does.
func TestShuffleInParts(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol8})
	p := defaultParams
	p.Seed, p.Shuffle = 77, true
	h.ok(part("u", 0, testChunks(9)))
	h.ok(&DatasetCommit{UploadID: "u", Parts: 1, NumChunks: 9, Params: p})
	var got []int
	for range 9 {
		got = append(got, h.getTask(0).ID)
	}
	if want := PassOrder(77, true, 0, 9); !slices.Equal(got, want) {
		t.Fatalf("dispatched %v, want %v", got, want)
	}
	if d, _ := h.f.Dataset(DefaultJob, 0); d.Params.Seed != 77 || !d.Params.Shuffle {
		t.Fatalf("dataset params %+v", d.Params)
	}
}

// TestShuffleRestoredCursor: a restored cursor puts the tasks not
// finished back in the order of the cursor's pass.
func TestShuffleRestoredCursor(t *testing.T) {
	const seed, n = 11, 12
	h := shuffleHarness(t, n, seed, true)
	// Through pass 0, into pass 1.
	for range n {
		h.finish(h.getTask(0))
	}
	order := PassOrder(seed, true, 1, n)
	done := map[int]bool{}
	for _, want := range order[:4] {
		m := h.getTask(1)
		if m.ID != want {
			t.Fatalf("pass 1 dispatched %d, want %d", m.ID, want)
		}
		if want%2 == 0 {
			h.finish(m)
			done[m.ID] = true
		}
	}
	h.ok(&CommitCursor{Step: 1})
	for range 3 {
		h.finish(h.getTask(1))
	}
	h.ok(&RestoreCursor{ID: 1})
	var want, got []int
	for _, id := range order {
		if !done[id] {
			want = append(want, id)
		}
	}
	for range want {
		got = append(got, h.getTask(1).ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after the restore: %v, want %v", got, want)
	}
}

// TestShuffleNeedsProtocol8: below Protocol8 a seed or shuffle is refused
// by the leader (ErrUpgradePending) and by apply on every replica alike,
// and changes nothing; a dataset without them is in id order.
func TestShuffleNeedsProtocol8(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol7})
	for _, p := range []DatasetParams{{Shuffle: true}, {Seed: 3}, {Shuffle: true, Seed: 3}} {
		params := defaultParams
		params.Shuffle, params.Seed = p.Shuffle, p.Seed
		c := &SetDataset{Params: params, Chunks: testChunks(3)}
		if err := h.f.Allows(c); !errors.Is(err, ErrUpgradePending) {
			t.Fatalf("Allows %+v at level 7: %v, want ErrUpgradePending", p, err)
		}
		h.rejects(c)
		h.ok(part("u", 0, testChunks(2)))
		h.rejects(&DatasetCommit{UploadID: "u", Parts: 1, NumChunks: 2, Params: params})
		h.advance(UploadIdleTimeout)
		h.tick()
	}
	h.setDataset(3, defaultParams)
	if got := []int{h.getTask(0).ID, h.getTask(0).ID, h.getTask(0).ID}; !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("dispatched %v, want id order", got)
	}
}

// TestShuffleEncoding: the order is written after the patterns, with an
// empty list of patterns when there are none, and only when set; each
// command has one encoding.
func TestShuffleEncoding(t *testing.T) {
	p := defaultParams
	p.Shuffle, p.Seed = true, 1<<60
	for _, c := range []Command{
		&SetDataset{Header: Header{Now: t0}, Params: p, Chunks: testChunks(2)},
		&SetDataset{Header: Header{Now: t0}, Params: p, Chunks: testChunks(2), Patterns: []string{"a/*"}},
		&DatasetCommit{Header: Header{Now: t0}, UploadID: "u", Parts: 1, NumChunks: 2, Params: DatasetParams{ChunksPerTask: 1, Seed: 9}},
		&DatasetCommit{Header: Header{Now: t0}, UploadID: "u", Parts: 1, NumChunks: 2, Params: defaultParams, Patterns: []string{"b"}},
	} {
		b := Encode(c)
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%v: %v", c.Type(), err)
		}
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", c) || !bytes.Equal(Encode(got), b) {
			t.Fatalf("round trip: %+v, want %+v", got, c)
		}
	}
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol8})
	b := Encode(&SetDataset{Header: Header{Now: h.now}, Params: defaultParams, Chunks: testChunks(1)})
	h.invalid(append(slices.Clone(b), 0))       // an empty list of patterns and no order
	h.invalid(append(slices.Clone(b), 0, 0, 0)) // an order of no seed in id order
	h.invalid(append(slices.Clone(b), 0, 2, 0)) // not a boolean
}

// TestShuffleInSnapshots: a Protocol7 state writes snapshot version 10,
// which has no order; from Protocol8 version 11 keeps each dataset's
// seed and shuffle, and a version 11 snapshot of a dataset with them
// below Protocol8 is refused.
func TestShuffleInSnapshots(t *testing.T) {
	f := New()
	f.ApplyEntry(1, Encode(&SetProtocol{Header: Header{Now: t0}, Level: Protocol7}))
	f.ApplyEntry(2, Encode(&SetDataset{Header: Header{Now: t0, Job: "a"}, Params: defaultParams, Chunks: testChunks(3)}))
	if v := snapshotVersionOf(t, f); v != 10 {
		t.Fatalf("a Protocol7 state writes snapshot version %d, want 10", v)
	}
	g := restored(t, f.SnapshotBytes())
	p := defaultParams
	p.Shuffle, p.Seed = true, 0xfeedface
	for _, fsm := range []*FSM{f, g} {
		fsm.ApplyEntry(3, Encode(&SetProtocol{Header: Header{Now: t0}, Level: Protocol8}))
		if r := fsm.ApplyEntry(4, Encode(&SetDataset{Header: Header{Now: t0, Job: "b"}, Params: p, Chunks: testChunks(20)})); r.Code != CodeOK {
			t.Fatalf("SetDataset with a seed at Protocol8: %+v", r)
		}
		fsm.ApplyEntry(5, Encode(&GetTask{Header: Header{Now: t0, Job: "b"}}))
	}
	if v := snapshotVersionOf(t, f); v != 11 {
		t.Fatalf("a Protocol8 state writes snapshot version %d, want 11", v)
	}
	if f.StateHash() != g.StateHash() {
		t.Fatal("a replica restored from version 10 and one that was not disagree")
	}
	r := restored(t, f.SnapshotBytes())
	if d, _ := r.Dataset("b", 0); !reflect.DeepEqual(d.Params, p) || r.StateHash() != f.StateHash() {
		t.Fatalf("version 11 restored the params as %+v, want %+v", d.Params, p)
	}
	if d, _ := r.Dataset("a", 0); !reflect.DeepEqual(d.Params, defaultParams) {
		t.Fatalf("the dataset set before Protocol8 has params %+v", d.Params)
	}
	// The restored replica goes on in the same order.
	var got []int
	for i := range 19 {
		res := r.ApplyEntry(uint64(6+i), Encode(&GetTask{Header: Header{Now: t0, Job: "b"}}))
		got = append(got, res.Task.Meta.ID)
	}
	if want := PassOrder(p.Seed, true, 0, 20)[1:]; !slices.Equal(got, want) {
		t.Fatalf("the restored replica dispatched %v, want %v", got, want)
	}

	s := f.s.clone()
	s.protocol = Protocol7
	var b bytes.Buffer
	if err := encodeStateVersion(&b, s, 11); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeState(b.Bytes()); err == nil {
		t.Fatal("a version 11 snapshot at protocol level 7 restored")
	}
}

// BenchmarkPassOrder measures filling todo at the start of a pass of 10^6
// tasks, in id order and shuffled.
func BenchmarkPassOrder(b *testing.B) {
	for _, shuffle := range []bool{false, true} {
		b.Run(fmt.Sprint("shuffle=", shuffle), func(b *testing.B) {
			j := &job{tasks: make([]task, 1_000_000), ds: &dataset{params: DatasetParams{Shuffle: shuffle, Seed: 1}}}
			for b.Loop() {
				j.queues[qTodo] = emptyList()
				j.eachInPassOrder(1, func(i int32) { j.pushBack(qTodo, i) })
			}
		})
	}
}
