package fsm

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// TestChunkIndex checks that a chunkIndex reads back the chunks added to
// it, by at and by each over any range, whatever forms its columns take
// (runs or plain values, 32- or 64-bit offsets), and that a capped copy
// keeps reading its chunks while the original grows.
func TestChunkIndex(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// Few distinct values give long runs; many, short ones.
		paths := rapid.Uint32Range(0, rapid.Uint32Range(0, 200).Draw(t, "paths")).Draw(t, "maxPath")
		runLen := rapid.IntRange(1, 50).Draw(t, "runLen")
		big := rapid.Bool().Draw(t, "big")
		n := rapid.IntRange(0, 3000).Draw(t, "n")
		var want []chunkRef
		x := newChunkIndex(rapid.IntRange(0, n).Draw(t, "capacity"))
		var copies []chunkIndex
		for i := range n {
			c := chunkRef{
				path:    rapid.Uint32Range(0, paths).Draw(t, "path"),
				records: uint32(i / runLen % 3),
				offset:  int64(i) * 4096,
			}
			if i > 0 && rapid.IntRange(0, runLen).Draw(t, "same") != 0 {
				c.path = want[i-1].path
			}
			if big && i > n/2 {
				c.offset = math.MaxUint32 + int64(i)
			}
			want = append(want, c)
			x.add(c)
			if i%500 == 0 {
				copies = append(copies, x.capped())
			}
		}
		check := func(x *chunkIndex, want []chunkRef) {
			if x.len() != len(want) {
				t.Fatalf("len %d, want %d", x.len(), len(want))
			}
			for i, w := range want {
				if got := x.at(i); got != w {
					t.Fatalf("at(%d) = %+v, want %+v", i, got, w)
				}
			}
			lo := rapid.IntRange(0, len(want)).Draw(t, "lo")
			hi := rapid.IntRange(lo, len(want)).Draw(t, "hi")
			i := lo
			x.each(lo, hi, func(c chunkRef) {
				if c != want[i] {
					t.Fatalf("each: chunk %d = %+v, want %+v", i, c, want[i])
				}
				i++
			})
			if i != hi {
				t.Fatalf("each(%d, %d) gave %d chunks", lo, hi, i-lo)
			}
		}
		check(&x, want)
		for _, c := range copies {
			check(&c, want[:c.len()])
		}
	})
}

// TestChunkIndexForms checks the compact forms the columns take: one run
// for chunks of one file and one record count, 32-bit offsets while they
// fit, and plain values once the runs are short.
func TestChunkIndexForms(t *testing.T) {
	x := newChunkIndex(0)
	for i := range 10_000 {
		x.add(chunkRef{path: 0, records: 1, offset: int64(i) * 24})
	}
	if len(x.paths.starts) != 1 || len(x.records.starts) != 1 || x.off64 != nil || len(x.off32) != 10_000 {
		t.Fatalf("one file: %d path runs, %d record runs, 64-bit offsets %v", len(x.paths.starts), len(x.records.starts), x.off64 != nil)
	}
	for i := range 30_000 {
		x.add(chunkRef{path: uint32(i % 3), records: 1, offset: math.MaxUint32 + 1})
	}
	if !x.paths.plainForm || x.records.plainForm || x.off32 != nil || len(x.off64) != 40_000 {
		t.Fatalf("alternating files: plain paths %v, plain records %v, 64-bit offsets %v", x.paths.plainForm, x.records.plainForm, x.off64 != nil)
	}
	if c := x.at(10_001); c != (chunkRef{path: 1, records: 1, offset: math.MaxUint32 + 1}) {
		t.Fatalf("at(10001) = %+v", c)
	}
}
