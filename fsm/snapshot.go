package fsm

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
)

// snapshotMagic starts every snapshot; snapshotVersion follows it.
const (
	snapshotMagic   = "RMFSM"
	snapshotVersion = 1
)

// clone returns a copy of s that later applies cannot change. Immutable
// parts (the dataset, member data) are shared; the task array is copied in
// one memcpy because it holds no pointers.
func (s *state) clone() *state {
	c := *s
	c.tasks = slices.Clone(s.tasks)
	c.uploads = make(map[string]*upload, len(s.uploads))
	for _, id := range sortedKeys(s.uploads) {
		u := s.uploads[id]
		c.uploads[id] = &upload{
			paths: u.paths[:len(u.paths):len(u.paths)], chunks: u.chunks[:len(u.chunks):len(u.chunks)],
			parts: u.parts, touched: u.touched,
		}
	}
	c.groups = make(map[string]*group, len(s.groups))
	for _, id := range sortedKeys(s.groups) {
		g := *s.groups[id]
		g.members = slices.Clone(g.members)
		c.groups[id] = &g
	}
	c.nodes = maps.Clone(s.nodes)
	c.dedup = newDedupTable()
	for cl := s.dedup.head; cl != nil; cl = cl.next {
		cc := &dedupClient{id: cl.id, lastSeen: cl.lastSeen, floor: cl.floor, entries: slices.Clone(cl.entries)}
		c.dedup.clients[cc.id] = cc
		c.dedup.pushBack(cc)
		c.dedup.n++
	}
	return &c
}

// snapWriter streams an encoding to w in blocks.
type snapWriter struct {
	w   io.Writer
	e   encoder
	err error
}

func (sw *snapWriter) flushIfFull() {
	if sw.e.len() >= 64<<10 {
		sw.flush()
	}
}

func (sw *snapWriter) flush() {
	if sw.err == nil && sw.e.len() > 0 {
		_, sw.err = sw.w.Write(sw.e.buf)
	}
	sw.e.reset()
}

// encodeState writes the whole state in the versioned snapshot format. Every
// map is written in key order, so equal states give equal bytes.
func encodeState(w io.Writer, s *state) error {
	sw := &snapWriter{w: w, e: encoder{buf: make([]byte, 0, 80<<10)}}
	e := &sw.e
	e.raw([]byte(snapshotMagic))
	e.uvarint(snapshotVersion)
	e.varint(s.clock)
	e.int(s.pass)
	e.uvarint(s.nextGen)

	e.bool(s.ds != nil)
	if s.ds != nil {
		s.ds.params.encode(e)
		e.strings(s.ds.paths)
		writeChunkRefs(sw, s.ds.chunks)
	}

	e.uvarint(uint64(len(s.tasks)))
	for i := range s.tasks {
		t := &s.tasks[i]
		e.uint32(t.epoch)
		e.uint32(t.passEpoch)
		e.uint32(t.failures)
		e.varint(t.deadline)
		sw.flushIfFull()
	}
	for q := range s.queues {
		e.uvarint(uint64(s.queues[q].n))
		prev := int32(-1)
		for i := s.queues[q].head; i >= 0; i = s.tasks[i].next {
			e.varint(int64(i - prev))
			prev = i
			sw.flushIfFull()
		}
	}

	e.uvarint(uint64(len(s.uploads)))
	for _, id := range sortedKeys(s.uploads) {
		u := s.uploads[id]
		e.string(id)
		e.uint32(u.parts)
		e.varint(u.touched)
		e.strings(u.paths)
		writeChunkRefs(sw, u.chunks)
	}

	e.string(s.save.holder)
	e.varint(s.save.deadline)

	e.uvarint(uint64(len(s.groups)))
	for _, id := range sortedKeys(s.groups) {
		g := s.groups[id]
		e.string(id)
		e.int(g.numPeers)
		e.varint(int64(g.timeout))
		e.varint(g.deadline)
		e.byte(byte(g.status))
		e.uvarint(uint64(len(g.members)))
		for _, m := range g.members {
			e.uuid(m.id)
			e.bytes(m.data)
			e.uvarint(m.gen)
			e.bool(m.left)
			sw.flushIfFull()
		}
	}

	e.uvarint(uint64(len(s.nodes)))
	for _, id := range sortedKeys(s.nodes) {
		n := s.nodes[id]
		e.string(n.ID)
		e.string(n.RaftAddr)
		e.string(n.APIAddr)
	}

	e.uvarint(uint64(s.dedup.n))
	for c := s.dedup.head; c != nil; c = c.next {
		e.uuid(c.id)
		e.varint(c.lastSeen)
		e.uvarint(c.floor)
		e.uvarint(uint64(len(c.entries)))
		for _, en := range c.entries {
			e.uvarint(en.seq)
			e.byte(byte(en.typ))
			e.byte(byte(en.code))
			e.bool(en.ignored)
			e.bool(en.granted)
			e.int(en.taskID)
			e.int(en.epoch)
			e.uvarint(en.gen)
		}
		sw.flushIfFull()
	}
	sw.flush()
	return sw.err
}

// writeChunkRefs writes chunks with delta-coded offsets.
func writeChunkRefs(sw *snapWriter, chunks []chunkRef) {
	e := &sw.e
	e.uvarint(uint64(len(chunks)))
	var prev int64
	for _, c := range chunks {
		e.uint32(c.path)
		e.varint(c.offset - prev)
		e.uint32(c.records)
		prev = c.offset
		sw.flushIfFull()
	}
}

func readChunkRefs(d *decoder, npaths int) []chunkRef {
	n := d.length(3)
	if d.err != nil {
		return nil
	}
	chunks := make([]chunkRef, n)
	var prev int64
	for i := range chunks {
		c := chunkRef{path: d.uint32(), offset: prev + d.varint(), records: d.uint32()}
		if d.err == nil && (int(c.path) >= npaths || c.offset < 0) {
			d.fail(fmt.Errorf("chunk %d: bad path index or offset", i))
		}
		chunks[i] = c
		prev = c.offset
	}
	return chunks
}

// decodeState reads a snapshot written by encodeState and checks its
// invariants, so a damaged snapshot is refused rather than half-applied.
func decodeState(b []byte) (*state, error) {
	if len(b) < len(snapshotMagic) || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return nil, errors.New("fsm snapshot: bad magic")
	}
	d := &decoder{buf: b[len(snapshotMagic):]}
	if v := d.uvarint(); d.err == nil && v != snapshotVersion {
		return nil, fmt.Errorf("fsm snapshot: version %d, want %d", v, snapshotVersion)
	}
	s := newState()
	s.clock = d.varint()
	s.pass = d.int()
	s.nextGen = d.uvarint()

	if d.bool() {
		ds := &dataset{}
		ds.params.decode(d)
		ds.paths = d.strings()
		ds.chunks = readChunkRefs(d, len(ds.paths))
		if d.err == nil && (validateParams(ds.params) != nil || len(ds.chunks) == 0) {
			d.fail(errors.New("bad dataset"))
		}
		s.ds = ds
	}

	n := d.length(4)
	if d.err == nil && s.ds != nil && n != s.ds.numTasks() {
		d.fail(fmt.Errorf("%d tasks for %d chunks", n, len(s.ds.chunks)))
	}
	if n > 0 {
		s.tasks = make([]task, n)
	}
	for i := range s.tasks {
		s.tasks[i] = task{epoch: d.uint32(), passEpoch: d.uint32(), failures: d.uint32(), deadline: d.varint(), prev: -1, next: -1, queue: numQueues}
	}
	for q := range s.queues {
		m := d.length(1)
		prev := int32(-1)
		for range m {
			i := int64(prev) + d.varint()
			if d.err == nil && (i < 0 || i >= int64(len(s.tasks)) || s.tasks[i].queue != numQueues) {
				d.fail(fmt.Errorf("queue %s: bad task index %d", queueNames[q], i))
			}
			if d.err != nil {
				break
			}
			prev = int32(i)
			if queueID(q) == qPending {
				s.insertPending(prev)
			} else {
				s.pushBack(queueID(q), prev)
			}
		}
	}
	total := 0
	for q := range s.queues {
		total += s.queues[q].n
	}
	if d.err == nil && total != len(s.tasks) {
		d.fail(fmt.Errorf("queues hold %d of %d tasks", total, len(s.tasks)))
	}

	for range d.length(1) {
		id := d.string()
		u := newUpload()
		u.parts = d.uint32()
		u.touched = d.varint()
		u.paths = d.strings()
		u.chunks = readChunkRefs(d, len(u.paths))
		for i, p := range u.paths {
			u.pathIndex[p] = uint32(i)
		}
		s.uploads[id] = u
	}

	s.save.holder = d.string()
	s.save.deadline = d.varint()

	for range d.length(1) {
		id := d.string()
		g := &group{numPeers: d.int(), timeout: time.Duration(d.varint()), deadline: d.varint(), status: groupStatus(d.byte())}
		if d.err == nil && g.status > groupTimedOut {
			d.fail(fmt.Errorf("group %q: bad status %d", id, g.status))
		}
		for range d.length(1) {
			m := member{id: uuid.UUID(d.uuid()), data: d.bytes(), gen: d.uvarint(), left: d.bool()}
			g.members = append(g.members, m)
			g.dataSize += len(m.data)
		}
		s.groups[id] = g
	}
	s.updateGroupDeadline()

	for range d.length(1) {
		n := Node{ID: d.string(), RaftAddr: d.string(), APIAddr: d.string()}
		s.nodes[n.ID] = n
	}

	for range d.length(1) {
		c := &dedupClient{id: uuid.UUID(d.uuid()), lastSeen: d.varint(), floor: d.uvarint()}
		for range d.length(1) {
			c.entries = append(c.entries, dedupEntry{
				seq: d.uvarint(), typ: CmdType(d.byte()), code: Code(d.byte()),
				ignored: d.bool(), granted: d.bool(), taskID: d.int(), epoch: d.int(), gen: d.uvarint(),
			})
		}
		if d.err != nil {
			break
		}
		if _, dup := s.dedup.clients[c.id]; dup {
			d.fail(fmt.Errorf("duplicate dedup client %s", c.id))
			break
		}
		s.dedup.clients[c.id] = c
		s.dedup.pushBack(c)
		s.dedup.n++
	}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("fsm snapshot: %w", err)
	}
	return s, nil
}
