package fsm

import (
	"math"
	"sort"
)

// chunkIndex is a list of chunks with their paths interned, kept in
// columns so that a large dataset of one or a few files costs about 4
// bytes a chunk rather than a 16-byte chunkRef: the path indexes and the
// record counts are run-length coded while that is smaller (the chunks
// of a file come together and mostly hold as many records), and the
// offsets take 32 bits each while every one fits. It only grows, by add;
// an element once added never changes, so a copy of the struct whose
// slices are capped (capped) reads the same chunks whatever is added to
// the original later. Its form is memory only: the snapshot and the
// entries write chunks one by one, as they always did.
type chunkIndex struct {
	n       int
	paths   runColumn
	records runColumn
	// off32 holds the offsets while every one fits 32 bits; off64 holds
	// them once one does not, and off32 is then nil.
	off32 []uint32
	off64 []int64
}

// runColumn is a column of uint32 values: runs of equal values (starts
// and values, the index of each run's first element and its value) while
// they take no more room than the values would, else every value
// (plain, and plainForm set).
type runColumn struct {
	starts, values []uint32
	plain          []uint32
	plainForm      bool
}

// minRunsForPlain is the number of runs below which a column stays
// run-length coded however short its runs: a few runs cost little.
const minRunsForPlain = 64

// newChunkIndex returns an empty index with room for n chunks.
func newChunkIndex(n int) chunkIndex {
	return chunkIndex{off32: make([]uint32, 0, n)}
}

// len is the number of chunks.
func (x *chunkIndex) len() int { return x.n }

// add appends c.
func (x *chunkIndex) add(c chunkRef) {
	switch {
	case x.off64 != nil:
		x.off64 = append(x.off64, c.offset)
	case c.offset >= 0 && c.offset <= math.MaxUint32:
		x.off32 = append(x.off32, uint32(c.offset))
	default:
		x.off64 = make([]int64, len(x.off32), max(2*len(x.off32), 16))
		for i, o := range x.off32 {
			x.off64[i] = int64(o)
		}
		x.off32 = nil
		x.off64 = append(x.off64, c.offset)
	}
	x.paths.add(x.n, c.path)
	x.records.add(x.n, c.records)
	x.n++
}

// at returns chunk i.
func (x *chunkIndex) at(i int) chunkRef {
	c := chunkRef{path: x.paths.at(i), records: x.records.at(i)}
	if x.off64 != nil {
		c.offset = x.off64[i]
	} else {
		c.offset = int64(x.off32[i])
	}
	return c
}

// each calls fn with the chunks [lo, hi) in order.
func (x *chunkIndex) each(lo, hi int, fn func(chunkRef)) {
	if lo >= hi {
		return
	}
	pk, rk := x.paths.run(lo), x.records.run(lo)
	for i := lo; i < hi; i++ {
		c := chunkRef{path: x.paths.next(i, &pk), records: x.records.next(i, &rk)}
		if x.off64 != nil {
			c.offset = x.off64[i]
		} else {
			c.offset = int64(x.off32[i])
		}
		fn(c)
	}
}

// capped returns a copy of x that reads the same chunks whatever is
// added to x later: an append to either copies the slices it grows.
func (x *chunkIndex) capped() chunkIndex {
	c := *x
	c.off32, c.off64 = capSlice(x.off32), capSlice(x.off64)
	c.paths, c.records = x.paths.capped(), x.records.capped()
	return c
}

func capSlice[T any](s []T) []T { return s[:len(s):len(s)] }

// add appends v as element i (the column's length).
func (c *runColumn) add(i int, v uint32) {
	switch {
	case c.plainForm:
		c.plain = append(c.plain, v)
		return
	case len(c.values) > 0 && c.values[len(c.values)-1] == v:
		return
	}
	if len(c.starts) >= minRunsForPlain && 2*len(c.starts) >= i {
		// Runs this short take more room than the values.
		c.plain = make([]uint32, i, max(2*i, 16))
		k := 0
		for j := range c.plain {
			c.plain[j] = c.next(j, &k)
		}
		c.starts, c.values, c.plainForm = nil, nil, true
		c.plain = append(c.plain, v)
		return
	}
	c.starts = append(c.starts, uint32(i))
	c.values = append(c.values, v)
}

// at returns element i.
func (c *runColumn) at(i int) uint32 {
	if c.plainForm {
		return c.plain[i]
	}
	return c.values[c.run(i)]
}

// run returns the run element i is in (0 in the plain form).
func (c *runColumn) run(i int) int {
	if c.plainForm {
		return 0
	}
	return sort.Search(len(c.starts), func(k int) bool { return int(c.starts[k]) > i }) - 1
}

// next returns element i, with *k the run of element i-1 or i (as run
// gave it), which it moves to element i's: a walk over consecutive
// elements costs O(1) each.
func (c *runColumn) next(i int, k *int) uint32 {
	if c.plainForm {
		return c.plain[i]
	}
	for *k+1 < len(c.starts) && int(c.starts[*k+1]) <= i {
		*k++
	}
	return c.values[*k]
}

func (c *runColumn) capped() runColumn {
	return runColumn{starts: capSlice(c.starts), values: capSlice(c.values), plain: capSlice(c.plain), plainForm: c.plainForm}
}
