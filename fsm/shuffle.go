package fsm

import "math/bits"

// Seeded shuffles (Protocol8). A dataset set with Shuffle dispatches each
// pass's tasks in a permutation of the task indexes derived from the
// dataset's Seed and the pass alone: todo is filled in that order when a
// pass starts, and a task that comes back (its lease ran out, it failed,
// its session ended) goes to the end of todo, as it always did. So the
// order in which a pass's tasks are first dispatched is a function of
// (Seed, pass, number of tasks), whatever the number of trainers and
// whatever faults happen. Without Shuffle a pass is in id order.
//
// The permutation needs O(1) memory, so that a job of 10^7 tasks costs
// nothing more than one in id order: it is a Feistel network over the
// smallest power of two that holds the indexes, with cycle walking (an
// index that the network maps outside [0, n) is mapped again until it
// lands inside), which keeps it a bijection of [0, n). The network has
// feistelRounds rounds, alternately over the high and the low part of an
// index, each keyed from (Seed, pass, round). Nothing here draws on a
// random source: the leader draws the seed and records it in the log.
//
// The permutation is part of the protocol: replicas agree because they
// compute the same one, so changing it needs a new protocol level
// (TestPermutationIsStable pins it). Filling todo in a permuted order
// touches the task array at random, which costs a pass start about 80 ms
// per million tasks instead of 8 in id order (BenchmarkPassOrder).

// feistelRounds is the number of rounds of the network: four make a
// Feistel network of pseudo-random round functions a pseudo-random
// permutation (Luby and Rackoff).
const feistelRounds = 4

// permutation is the permutation of [0, n) of one seed and pass.
type permutation struct {
	n uint64
	// hiBits and loBits are the widths of the two parts of an index in
	// the network's domain [0, 2^(hiBits+loBits)).
	hiBits, loBits uint
	keys           [feistelRounds]uint64
}

// newPermutation returns the permutation of [0, n) of seed and pass.
func newPermutation(seed uint64, pass int, n int) permutation {
	p := permutation{n: uint64(max(n, 0))}
	width := uint(0)
	if p.n > 1 {
		width = uint(bits.Len64(p.n - 1))
	}
	p.hiBits = width / 2
	p.loBits = width - p.hiBits
	// Each round's key depends on the seed, the pass and the round; the
	// constants only keep a zero seed and pass from giving zero keys.
	base := mix64(mix64(seed^0x243f6a8885a308d3) + uint64(pass)*golden64)
	for r := range p.keys {
		p.keys[r] = mix64(base + uint64(r+1)*0x9e3779b97f4a7c55)
	}
	return p
}

// golden64 is 2^64 divided by the golden ratio, SplitMix64's increment.
const golden64 = 0x9e3779b97f4a7c15

// mix64 is SplitMix64's finalizer: a bijection of 64-bit words whose
// every output bit depends on every input bit.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// round is the round function: a keyed hash of one part of an index.
// The multiplication spreads the part's bits upwards before the key and
// the finalizer mix them all.
func round(key, half uint64) uint64 { return mix64(key ^ half*golden64) }

// feistel maps x, in [0, 2^(hiBits+loBits)), through the network. Each
// round replaces (hi, lo) with (lo, hi XOR F(lo)) cut to hi's width,
// which can be undone whatever F is, so the network is a bijection of its
// domain; the two parts swap widths each round when they differ.
func (p *permutation) feistel(x uint64) uint64 {
	hiBits, loBits := p.hiBits, p.loBits
	hi, lo := x>>loBits, x&lowMask(loBits)
	for _, key := range p.keys {
		hi, lo = lo, (hi^round(key, lo))&lowMask(hiBits)
		hiBits, loBits = loBits, hiBits
	}
	return hi<<loBits | lo
}

// lowMask is a mask of the low n bits.
func lowMask(n uint) uint64 { return 1<<n - 1 }

// at returns the element at position i of the permutation, for i in
// [0, n). The network's domain is less than twice n, so the walk takes
// fewer than two steps on average.
func (p *permutation) at(i uint64) uint64 {
	x := p.feistel(i)
	for x >= p.n {
		x = p.feistel(x)
	}
	return x
}

// eachInPassOrder calls fn with every task index of the job, in the order
// in which the tasks of pass are first dispatched: the permutation of the
// dataset's seed and pass when it shuffles, else id order.
func (j *job) eachInPassOrder(pass int, fn func(i int32)) {
	if !j.ds.params.Shuffle {
		for i := range j.tasks {
			fn(int32(i))
		}
		return
	}
	p := newPermutation(j.ds.params.Seed, pass, len(j.tasks))
	for k := range uint64(len(j.tasks)) {
		fn(int32(p.at(k)))
	}
}

// PassOrder returns the task ids of a dataset of n tasks set with seed
// and shuffle, in the order in which pass first dispatches them: what
// the state machine does, for tools and tests that check it.
func PassOrder(seed uint64, shuffle bool, pass, n int) []int {
	out := make([]int, 0, max(n, 0))
	if !shuffle {
		for i := range n {
			out = append(out, i+1)
		}
		return out
	}
	p := newPermutation(seed, pass, n)
	for k := range uint64(max(n, 0)) {
		out = append(out, int(p.at(k))+1)
	}
	return out
}
