package fsm

import (
	"math"
	"strings"

	"github.com/google/uuid"
)

// SplitChunks cuts chunks into the runs of a dataset upload, one run per
// DatasetPart entry. The runs are consecutive subslices of chunks (they
// share its array) and concatenate to it; nil when chunks is empty.
//
// The DatasetPart entry of each run, as Encode writes it with its header,
// its path table and every chunk, takes at most maxEntryBytes bytes,
// whatever its header (with a job name of up to MaxJobNameLen bytes), its
// upload id (up to MaxIDLen bytes) and its part number, so that any
// proposer can use the runs; about 620 bytes of each entry are kept for
// the largest of them. Each run is as long as the limit
// allows: with the next chunk, its entry would exceed maxEntryBytes.
// A chunk whose entry alone exceeds maxEntryBytes gets a run of its own,
// for the caller to propose or refuse. A SetDataset entry of the same
// chunks and no patterns is never larger than their DatasetPart entry, so
// a single run fits one SetDataset entry too; DatasetCommands measures one
// with patterns.
//
// Sizes are measured with the encoder, one chunk at a time, so the cost
// is linear in the number of chunks (and the bytes of their paths).
func SplitChunks(chunks []Chunk, maxEntryBytes int) [][]Chunk {
	if len(chunks) == 0 {
		return nil
	}
	z := newPartSizer()
	var runs [][]Chunk
	start := 0
	for i, c := range chunks {
		size, cost := z.measure(c)
		if size > maxEntryBytes && i > start {
			runs = append(runs, chunks[start:i])
			start = i
			z.newRun()
			_, cost = z.measure(c)
		}
		z.add(c, cost)
	}
	return append(runs, chunks[start:])
}

// largestPart returns the DatasetPart of chunks with the largest header,
// upload id and part number any proposer could give it: SplitChunks keeps
// its encoding under the limit.
func largestPart(chunks []Chunk) *DatasetPart {
	return &DatasetPart{
		// A negative Now is invalid, but it is the longest varint.
		Header: Header{Now: math.MinInt64, Request: RequestID{Client: uuid.Max, Seq: math.MaxUint64},
			Job: strings.Repeat("j", MaxJobNameLen)},
		UploadID: strings.Repeat("u", MaxIDLen),
		Part:     math.MaxUint32,
		Chunks:   chunks,
	}
}

// partSizer tracks the encoded size of largestPart(run) as chunks are
// added to the run. The entry is a fixed part (version, type, header,
// upload id, part number), then encodeChunks: the path table's count and
// paths, the chunk count and one triple per chunk. Each piece is measured
// by encoding it into a scratch encoder.
type partSizer struct {
	fixed int // the entry of no chunks, less its two counts
	e     encoder

	// refs holds the index of each path in the run's path table.
	refs map[string]uint32
	// last and lastIndex repeat the previous chunk's path and its index,
	// since the chunks of one file usually come together; hasLast is
	// false at the start of a run.
	last      string
	lastIndex uint32
	hasLast   bool

	npaths, nchunks       int
	pathBytes, chunkBytes int
}

// chunkCost is what adding one chunk to the run takes.
type chunkCost struct {
	index      uint32 // its path's index in the table
	newPath    bool   // the path joins the table
	pathBytes  int    // the path's encoding, when new
	chunkBytes int    // the chunk's triple
}

func newPartSizer() *partSizer {
	z := &partSizer{refs: make(map[string]uint32)}
	z.fixed = len(Encode(largestPart(nil))) - 2*z.uvarintLen(0)
	return z
}

// newRun starts an empty run. A new map, sized like the last run's,
// costs less than clearing one: clear takes time in the map's capacity,
// which one run with many files would leave large for every later run.
func (z *partSizer) newRun() {
	z.refs = make(map[string]uint32, z.npaths)
	z.hasLast = false
	z.npaths, z.nchunks, z.pathBytes, z.chunkBytes = 0, 0, 0, 0
}

// measure returns the size of the run's entry with c added, and what
// adding it takes.
func (z *partSizer) measure(c Chunk) (int, chunkCost) {
	index, ok := z.lastIndex, z.hasLast && c.Path == z.last
	if !ok {
		index, ok = z.refs[c.Path]
	}
	cost := chunkCost{index: index}
	npaths := z.npaths
	if !ok {
		cost.index, cost.newPath = uint32(z.npaths), true
		z.e.reset()
		z.e.string(c.Path)
		cost.pathBytes = z.e.len()
		npaths++
	}
	z.e.reset()
	encodeChunk(&z.e, cost.index, c)
	cost.chunkBytes = z.e.len()
	size := z.fixed + z.uvarintLen(npaths) + z.pathBytes + cost.pathBytes +
		z.uvarintLen(z.nchunks+1) + z.chunkBytes + cost.chunkBytes
	return size, cost
}

// add adds c, measured as cost, to the run.
func (z *partSizer) add(c Chunk, cost chunkCost) {
	if cost.newPath {
		z.refs[c.Path] = cost.index
		z.npaths++
		z.pathBytes += cost.pathBytes
	}
	z.last, z.lastIndex, z.hasLast = c.Path, cost.index, true
	z.nchunks++
	z.chunkBytes += cost.chunkBytes
}

// uvarintLen returns the encoded length of count n.
func (z *partSizer) uvarintLen(n int) int {
	z.e.reset()
	z.e.uvarint(uint64(n))
	return z.e.len()
}

// DatasetCommands returns the commands that set the dataset of job ("" is
// DefaultJob) to chunks with params, recording patterns (none for a chunk
// list given as such), each of whose log entries stays within
// maxEntryBytes: one SetDataset when the chunks and the patterns fit one
// entry (or maxEntryBytes is 0, for a store without an entry limit),
// otherwise a DatasetPart per run of SplitChunks under uploadID and a
// DatasetCommit, which carries the patterns. The request id goes on the
// last command, so that a retried call is answered by de-duplication.
// Every proposer of a dataset proposes these, in order.
func DatasetCommands(job string, req RequestID, params DatasetParams, patterns []string, chunks []Chunk, uploadID string, maxEntryBytes int) []Command {
	var parts [][]Chunk
	if maxEntryBytes > 0 {
		parts = SplitChunks(chunks, maxEntryBytes)
	}
	one := &SetDataset{Header: Header{Request: req, Job: job}, Params: params, Chunks: chunks, Patterns: patterns}
	// SplitChunks leaves room for the settings, not for patterns, which
	// a mixture's sources carry too.
	if len(parts) == 0 || len(parts) == 1 && ((len(patterns) == 0 && len(params.Sources) == 0) || entrySize(one) <= maxEntryBytes) {
		return []Command{one}
	}
	cmds := make([]Command, 0, len(parts)+1)
	for i, p := range parts {
		cmds = append(cmds, &DatasetPart{Header: Header{Job: job}, UploadID: uploadID, Part: uint32(i), Chunks: p})
	}
	return append(cmds, &DatasetCommit{
		Header: Header{Request: req, Job: job}, UploadID: uploadID,
		Parts: uint32(len(parts)), NumChunks: uint32(len(chunks)), Params: params, Patterns: patterns,
	})
}

// entrySize is the size of c's entry once a proposer stamps its time, at
// most: the longest Now is measured.
func entrySize(c *SetDataset) int {
	stamped := *c
	stamped.Now = math.MinInt64 // invalid, but the longest varint
	return len(Encode(&stamped))
}
