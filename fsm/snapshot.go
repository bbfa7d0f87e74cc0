package fsm

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
)

// snapshotMagic starts every snapshot; snapshotVersion follows it.
// Version 13, written from Protocol10 on, adds to each de-duplication
// entry of GetTask the tasks it leased after the first and the outcomes
// of the finishes it carried after the first (dedupEntry.more and
// moreFinish), after its number; and to each of RenewLease the outcome
// of each of its renewals, when it renewed more than one.
// Version 12, written from Protocol9 on, adds each dataset's sources
// after its seed and, after the queues of a mixture job, its changing
// state (encodeMixture); a mixture's todo queue is written source after
// source.
// Version 11, written from Protocol8 on, adds each dataset's Shuffle and
// Seed after its patterns; older versions restore with datasets in id
// order and no seed.
// Version 10, written from Protocol7 on, adds each job's positions and
// cursors after its rounds.
// Version 8, written from Protocol5 on, adds to each de-duplication entry
// of KVAdd, KVAppend, KVDelete and KVDeletePrefix the number its answer
// carries (dedupEntry.num) after the entry's job; those commands need
// Protocol5, so an older version holds none.
// Version 7, written from Protocol4 on, adds each dataset's patterns after
// its chunks; version 6 and older restore with datasets of no patterns.
// Version 6, written from Protocol3 on, adds each de-duplication client's
// owner (RequestID.Owner) after its floor.
// Version 5 adds the cluster's protocol level and its era (era.go) after
// the register's counter, and after each job's register the rounds of its
// hard-deadline groups that timed out (allgather.go); a state writes it
// only once its level is Protocol2 or later (snapshotVersionAt), and
// version 4 and older restore at Protocol1, in era 0, with no such rounds.
// Version 4 added the register: its limits and version counter in the
// cluster's part, and each job's keys after the job. Version 3 holds many
// jobs: the cluster's part, then every job in name order. Version 3 is
// still read, with empty registers and their default limits. Version 2 added the groups' timeout mode. Versions 1 and 2, one
// job's worth of state, are still read as DefaultJob (the job exists when
// it holds anything), version 1's groups failing on timeout as they then
// did.
const (
	snapshotMagic   = "RMFSM"
	snapshotVersion = 13
)

// clone returns a copy of s that later applies cannot change. Immutable
// parts (the datasets, member data) are shared; the task arrays are copied
// in one memcpy each because they hold no pointers.
func (s *state) clone() *state { return s.copyState(false) }

// snapshotCopy returns a copy of s for Snapshot.WriteTo only: as clone's,
// except that each job's tasks and queues are kept as their snapshot
// encoding (taskSection), which takes about a third of the room of the
// task array, rather than as a copy of the array.
func (s *state) snapshotCopy() *state { return s.copyState(true) }

func (s *state) copyState(encodeTasks bool) *state {
	c := *s
	c.forSnapshot = encodeTasks
	c.changes, c.kvChanges = nil, nil
	c.jobs = make(map[string]*job, len(s.jobs))
	for _, name := range sortedKeys(s.jobs) {
		if encodeTasks {
			c.jobs[name] = s.jobs[name].snapshotCopy(&c, snapshotVersionAt(s.protocol))
		} else {
			c.jobs[name] = s.jobs[name].clone(&c)
		}
	}
	c.nodes = maps.Clone(s.nodes)
	c.dedup = newDedupTable()
	c.dedup.maxActive = s.dedup.maxActive
	for cl := s.dedup.head; cl != nil; cl = cl.next {
		cc := &dedupClient{id: cl.id, lastSeen: cl.lastSeen, floor: cl.floor, owner: cl.owner, session: cl.session, entries: slices.Clone(cl.entries)}
		c.dedup.clients[cc.id] = cc
		c.dedup.pushBack(cc)
		c.dedup.n++
	}
	c.sessions = make(map[uint64]*session, len(s.sessions))
	for _, id := range sortedKeys(s.sessions) {
		ss := *s.sessions[id]
		// Only the references still live (see encodeSessions).
		ss.tasks, ss.keys, ss.saves = s.liveTasks(ss.tasks, nil), s.liveKeys(ss.keys, nil), slices.Clone(ss.saves)
		ss.taskPrune, ss.keyPrune = 2*len(ss.tasks), 2*len(ss.keys)
		c.sessions[id] = &ss
	}
	return &c
}

// clone returns a copy of the job, in cluster c, that later applies cannot
// change.
func (j *job) clone(c *state) *job {
	cp := j.cloneButTasks(c)
	cp.tasks = slices.Clone(j.tasks)
	return cp
}

// cloneButTasks is clone without the tasks, which the copy shares.
func (j *job) cloneButTasks(c *state) *job {
	cp := *j
	cp.cluster = c
	cp.uploads = make(map[string]*upload, len(j.uploads))
	for _, id := range sortedKeys(j.uploads) {
		u := j.uploads[id]
		cp.uploads[id] = &upload{
			paths: u.paths[:len(u.paths):len(u.paths)], chunks: u.chunks.capped(),
			parts: u.parts, touched: u.touched, pathBytes: u.pathBytes,
		}
	}
	cp.groups = make(map[string]*group, len(j.groups))
	for _, id := range sortedKeys(j.groups) {
		cp.groups[id] = j.groups[id].clone()
	}
	cp.timeouts = make(map[string][]timedOutRound, len(j.timeouts))
	for _, id := range sortedKeys(j.timeouts) {
		cp.timeouts[id] = slices.Clone(j.timeouts[id]) // the members are never modified
	}
	cp.kv = maps.Clone(j.kv) // the values are never modified
	cp.pos = j.pos.clone()
	cp.mix = j.mix.clone()
	return &cp
}

// snapshotCopy returns clone's copy of the job, but with its tasks and
// queues (and a mixture's state) encoded in snapshot format version
// rather than copied.
func (j *job) snapshotCopy(c *state, version uint64) *job {
	cp := j.cloneButTasks(c)
	cp.tasks = nil
	var blocks blockBuffer
	sw := &snapWriter{w: &blocks}
	encodeTasks(sw, j, version)
	sw.flush()
	cp.taskSection = &taskSection{version: version, blocks: blocks.blocks}
	return cp
}

// taskSection is a job's tasks and queues in snapshot encoding, in the
// blocks a snapWriter flushed, and the format version they were written
// in.
type taskSection struct {
	version uint64
	blocks  [][]byte
}

// blockBuffer keeps a copy of each block written to it.
type blockBuffer struct{ blocks [][]byte }

func (b *blockBuffer) Write(p []byte) (int, error) {
	b.blocks = append(b.blocks, slices.Clone(p))
	return len(p), nil
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

// writeBlocks writes what was encoded so far, then blocks.
func (sw *snapWriter) writeBlocks(blocks [][]byte) {
	sw.flush()
	for _, b := range blocks {
		if sw.err == nil {
			_, sw.err = sw.w.Write(b)
		}
	}
}

func (sw *snapWriter) flush() {
	if sw.err == nil && sw.e.len() > 0 {
		_, sw.err = sw.w.Write(sw.e.buf)
	}
	sw.e.reset()
}

// encodeState writes the whole state in the versioned snapshot format:
// the cluster's part, then every job in name order. Every map is written in
// key order, so equal states give equal bytes.
func encodeState(w io.Writer, s *state) error {
	return encodeStateVersion(w, s, snapshotVersionAt(s.protocol))
}

// encodeStateVersion writes s in snapshot format version, 3 or later.
// Version 3 has no register: its limits, its counter and its keys are
// left out (the tests write it to check that it is still read).
func encodeStateVersion(w io.Writer, s *state, version uint64) error {
	sw := &snapWriter{w: w, e: encoder{buf: make([]byte, 0, 4<<10)}} // grows to a block
	e := &sw.e
	encodeHeader(e, s, version)
	encodeNodes(e, s.nodes, version)
	encodeDedup(sw, &s.dedup, version)

	e.uvarint(uint64(len(s.jobs)))
	for _, name := range sortedKeys(s.jobs) {
		j := s.jobs[name]
		e.string(name)
		e.uvarint(j.seq)
		e.varint(j.createdAt)
		e.varint(j.lastActivity)
		e.int(j.pass)
		encodeJob(sw, j, version)
		if version >= 4 {
			encodeKV(sw, j)
		}
		if version >= 5 {
			encodeTimeouts(sw, j)
		}
		if version >= 10 {
			encodePositions(sw, j)
		}
	}
	if version >= 9 {
		encodeSessions(sw, s)
	}
	sw.flush()
	return sw.err
}

// encodeHeader writes the magic, the version and the cluster's counters,
// limits, level and era: the fields before the node registry, which
// NextEra rewrites without decoding the rest.
func encodeHeader(e *encoder, s *state, version uint64) {
	e.raw([]byte(snapshotMagic))
	e.uvarint(version)
	e.varint(s.clock)
	e.uvarint(s.nextGen)
	e.varint(s.graceUntil)
	e.uvarint(s.jobSeq)
	s.limits.encode(e)
	if version >= 4 {
		s.limits.encodeKV(e)
		e.uvarint(s.kvVersion)
	}
	if version >= 5 {
		e.uvarint(s.protocol)
		e.uvarint(s.era)
	}
}

// decodeCounters reads what encodeHeader wrote after the clock, for a
// version 3 or later.
func decodeCounters(d *decoder, s *state, version uint64) {
	s.nextGen = d.uvarint()
	s.graceUntil = d.varint()
	s.jobSeq = d.uvarint()
	s.limits.decode(d)
	if version >= 4 {
		s.limits.decodeKV(d)
		s.kvVersion = d.uvarint()
	}
	if version >= 5 {
		s.protocol = d.uvarint()
		if d.err == nil && (s.protocol < Protocol2 || s.protocol > Protocol) {
			d.fail(fmt.Errorf("protocol level %d in a version %d snapshot; this replica knows %d to %d", s.protocol, version, Protocol2, Protocol))
		}
		if d.err == nil && snapshotVersionAt(s.protocol) != version {
			d.fail(fmt.Errorf("protocol level %d in a version %d snapshot, which level %d writes", s.protocol, version, s.protocol))
		}
		s.era = d.uvarint()
	}
}

// encodeDedup writes the de-duplication table, least recently used client
// first; before version 3 an entry names no job.
func encodeDedup(sw *snapWriter, t *dedupTable, version uint64) {
	e := &sw.e
	e.uvarint(uint64(t.n))
	for c := t.head; c != nil; c = c.next {
		e.uuid(c.id)
		e.varint(c.lastSeen)
		e.uvarint(c.floor)
		if version >= 6 {
			e.uuid(c.owner)
		}
		if version >= 9 {
			e.uvarint(c.session)
		}
		e.uvarint(uint64(len(c.entries)))
		for _, en := range c.entries {
			e.uvarint(en.seq)
			e.byte(byte(en.typ))
			e.byte(byte(en.code))
			e.bool(en.ignored)
			e.bool(en.granted)
			e.int(int(en.taskID))
			e.int(en.epoch)
			e.uvarint(en.gen)
			e.varint(en.clock)
			if version >= 3 {
				e.uvarint(en.job)
			}
			if version >= 8 && kvNumbered(en.typ, version) {
				e.varint(en.num)
			}
			if version >= 13 && (en.typ == TypeGetTask || en.typ == TypeRenewLease) {
				b := en.batch
				if b == nil {
					b = &dedupBatch{}
				}
				e.uvarint(uint64(len(b.more)))
				for _, m := range b.more {
					e.int(int(m.id))
					e.int(m.epoch)
				}
				e.uvarint(uint64(len(b.outcomes)))
				for _, n := range b.outcomes {
					e.varint(int64(n))
				}
			}
		}
		sw.flushIfFull()
	}
}

// encodeKV writes a job's register in key order.
func encodeKV(sw *snapWriter, s *job) {
	e := &sw.e
	e.uvarint(uint64(len(s.kv)))
	for _, key := range sortedKeys(s.kv) {
		en := s.kv[key]
		e.string(key)
		e.uvarint(en.version)
		e.bytes(en.value)
		sw.flushIfFull()
	}
}

// encodeTimeouts writes a job's kept rounds that timed out, by group id,
// each group's oldest first.
func encodeTimeouts(sw *snapWriter, s *job) {
	e := &sw.e
	e.uvarint(uint64(len(s.timeouts)))
	for _, id := range sortedKeys(s.timeouts) {
		e.string(id)
		e.uvarint(uint64(len(s.timeouts[id])))
		for _, r := range s.timeouts[id] {
			e.uvarint(r.lastGen)
			e.varint(r.until)
			e.uvarint(uint64(len(r.members)))
			for _, m := range r.members {
				e.uuid(m.id)
				e.uvarint(m.gen)
			}
			sw.flushIfFull()
		}
	}
}

// encodeJob writes a job's dataset, tasks, queues, uploads, save-model
// lease and groups, as versions 1 and 2 wrote the whole state's; version 7
// adds the dataset's patterns, version 11 its shuffle and seed.
func encodeJob(sw *snapWriter, s *job, version uint64) {
	e := &sw.e
	e.bool(s.ds != nil)
	if s.ds != nil {
		s.ds.params.encode(e)
		e.strings(s.ds.paths)
		writeChunkRefs(sw, &s.ds.chunks)
		if version >= 7 {
			e.strings(s.ds.patterns)
		}
		if version >= 11 {
			e.bool(s.ds.params.Shuffle)
			e.uvarint(s.ds.params.Seed)
		}
		if version >= 12 {
			encodeSources(e, s.ds.params.Sources)
		}
	}

	if ts := s.taskSection; ts != nil {
		if ts.version != version {
			sw.err = fmt.Errorf("fsm snapshot: the copy's tasks are encoded in version %d, not %d", ts.version, version)
		}
		sw.writeBlocks(ts.blocks)
	} else {
		encodeTasks(sw, s, version)
	}

	e.uvarint(uint64(len(s.uploads)))
	for _, id := range sortedKeys(s.uploads) {
		u := s.uploads[id]
		e.string(id)
		e.uint32(u.parts)
		e.varint(u.touched)
		e.strings(u.paths)
		writeChunkRefs(sw, &u.chunks)
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
		e.bool(g.failOnTimeout)
		e.bool(g.overdue)
		e.uvarint(uint64(len(g.members)))
		for _, m := range g.members {
			e.uuid(m.id)
			e.bytes(m.data)
			e.uvarint(m.gen)
			e.bool(m.left)
			sw.flushIfFull()
		}
	}
}

// encodeTasks writes a job's tasks, its queues and, for a mixture, its
// changing state: the part of encodeJob that the task array holds.
func encodeTasks(sw *snapWriter, s *job, version uint64) {
	e := &sw.e
	e.uvarint(uint64(len(s.tasks)))
	for i := range s.tasks {
		t := &s.tasks[i]
		e.uint32(t.epoch)
		e.uint32(t.passEpoch)
		e.uint32(t.failures)
		e.varint(t.deadline)
		sw.flushIfFull()
	}
	for q := range queuesIn(version) {
		e.uvarint(uint64(s.queues[q].n))
		prev := int32(-1)
		write := func(i int32) {
			e.varint(int64(i - prev))
			prev = i
			sw.flushIfFull()
		}
		if queueID(q) == qTodo {
			s.eachTodo(write)
			continue
		}
		for i := s.queues[q].head; i >= 0; i = s.tasks[i].next {
			write(i)
		}
	}
	if s.mix != nil {
		encodeMixture(e, s.mix)
		encodeCarried(e, s)
	}

}

// writeChunkRefs writes chunks with delta-coded offsets.
func writeChunkRefs(sw *snapWriter, chunks *chunkIndex) {
	e := &sw.e
	e.uvarint(uint64(chunks.len()))
	var prev int64
	chunks.each(0, chunks.len(), func(c chunkRef) {
		e.uint32(c.path)
		e.varint(c.offset - prev)
		e.uint32(c.records)
		prev = c.offset
		sw.flushIfFull()
	})
}

func readChunkRefs(d *decoder, npaths int) chunkIndex {
	n := d.length(3)
	if d.err != nil {
		return chunkIndex{}
	}
	chunks := newChunkIndex(n)
	var prev int64
	for i := range n {
		c := chunkRef{path: d.uint32(), offset: prev + d.varint(), records: d.uint32()}
		if d.err == nil && (int(c.path) >= npaths || c.offset < 0) {
			d.fail(fmt.Errorf("chunk %d: bad path index or offset", i))
		}
		chunks.add(c)
		prev = c.offset
	}
	return chunks
}

// decodeState reads a snapshot written by encodeState, or by versions 1
// and 2, and checks its invariants, so a damaged snapshot is refused rather
// than half-applied.
func decodeState(b []byte) (*state, error) {
	if len(b) < len(snapshotMagic) || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return nil, errors.New("fsm snapshot: bad magic")
	}
	d := &decoder{buf: b[len(snapshotMagic):]}
	version := d.uvarint()
	if d.err == nil && (version < 1 || version > snapshotVersion) {
		return nil, fmt.Errorf("fsm snapshot: version %d, this replica reads 1 to %d", version, snapshotVersion)
	}
	s := newState()
	s.clock = d.varint()
	if version < 3 {
		// One job's worth of state, the cluster's fields among it.
		j := s.newJob(DefaultJob)
		j.pass = d.int()
		s.nextGen = d.uvarint()
		s.graceUntil = d.varint()
		decodeJob(d, j, version)
		// The default job is job 1, whether it holds anything or not, so
		// that the remembered requests of its commands name it.
		s.jobSeq = 1
		if j.ds != nil || len(j.uploads) != 0 || j.save.holder != "" || len(j.groups) != 0 || j.pass != 0 {
			j.seq = 1
			s.jobs[j.name] = j
		}
		decodeNodes(d, s, version)
		decodeDedup(d, s, version)
	} else {
		decodeCounters(d, s, version)
		decodeNodes(d, s, version)
		decodeDedup(d, s, version)
		keys := keyOrder{d: d, what: "job"}
		for range d.length(1) {
			j := s.newJob(keys.next(d.string()))
			j.seq = d.uvarint()
			j.createdAt = d.varint()
			j.lastActivity = d.varint()
			j.pass = d.int()
			decodeJob(d, j, version)
			if version >= 4 {
				decodeKV(d, j)
			}
			if version >= 5 {
				decodeTimeouts(d, j)
			}
			if version >= 10 {
				decodePositions(d, j)
			}
			if d.err != nil {
				break
			}
			s.jobs[j.name] = j
		}
		if version >= 9 {
			decodeSessions(d, s)
		}
	}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("fsm snapshot: %w", err)
	}
	for _, name := range sortedKeys(s.jobs) {
		j := s.jobs[name]
		j.recount()
		s.stateBytes += j.jobBytes
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("fsm snapshot: %w", err)
	}
	afterRestore(s)
	return s, nil
}

// decodeJob reads what encodeJob wrote into the empty job s.
func decodeJob(d *decoder, s *job, version uint64) {
	if d.bool() {
		ds := &dataset{}
		ds.params.decode(d)
		ds.paths = d.strings()
		ds.chunks = readChunkRefs(d, len(ds.paths))
		if version >= 7 {
			ds.patterns = d.strings()
		}
		if version >= 11 {
			ds.params.Shuffle = d.bool()
			ds.params.Seed = d.uvarint()
		}
		if version >= 12 {
			ds.params.Sources = decodeSources(d)
		}
		if d.err == nil && (validateParams(ds.params) != nil || ds.chunks.len() == 0) {
			d.fail(errors.New("bad dataset"))
		}
		if d.err == nil {
			ds = newDataset(ds.params, ds.patterns, ds.paths, ds.chunks)
		}
		s.ds = ds
		if d.err == nil && len(ds.sources) > 0 {
			if err := ds.checkSources(); err != nil {
				d.fail(err)
			} else {
				s.mix = newMixture(ds)
			}
		}
	}

	n := d.length(4)
	if d.err == nil && s.ds != nil && n != s.ds.numTasks() {
		d.fail(fmt.Errorf("%d tasks for %d chunks", n, s.ds.chunks.len()))
	}
	if n > 0 {
		s.tasks = make([]task, n)
	}
	for i := range s.tasks {
		s.tasks[i] = task{epoch: d.uint32(), passEpoch: d.uint32(), failures: d.uint32(), deadline: d.varint(), prev: -1, next: -1, queue: numQueues}
	}
	for q := range queuesIn(version) {
		m := d.length(1)
		prev := int32(-1)
		for range m {
			i := int64(prev) + d.varint()
			if d.err == nil && (i < 0 || i >= int64(len(s.tasks)) || s.tasks[i].queue != numQueues) {
				d.fail(fmt.Errorf("queue %s: bad task index %d", queueNames[q], i))
			}
			if d.err == nil && queueID(q) == qPending && prev >= 0 && s.tasks[i].deadline < s.tasks[prev].deadline {
				d.fail(fmt.Errorf("pending task %d out of deadline order", i+1))
			}
			if d.err != nil {
				break
			}
			prev = int32(i)
			s.pushBack(queueID(q), prev)
		}
	}
	total := 0
	for q := range s.queues {
		total += s.queues[q].n
	}
	if d.err == nil && total != len(s.tasks) {
		d.fail(fmt.Errorf("queues hold %d of %d tasks", total, len(s.tasks)))
	}
	if s.mix != nil {
		decodeMixture(d, s.mix)
		decodeCarried(d, s)
	}

	keys := keyOrder{d: d, what: "upload"}
	for range d.length(1) {
		id := keys.next(d.string())
		u := newUpload()
		u.parts = d.uint32()
		u.touched = d.varint()
		u.paths = d.strings()
		u.chunks = readChunkRefs(d, len(u.paths))
		for i, p := range u.paths {
			u.pathIndex[p] = uint32(i)
		}
		u.pathBytes = pathBytes(u.paths)
		s.uploads[id] = u
	}

	s.save.holder = d.string()
	s.save.deadline = d.varint()

	keys = keyOrder{d: d, what: "group"}
	for range d.length(1) {
		id := keys.next(d.string())
		g := &group{numPeers: d.int(), timeout: time.Duration(d.varint()), deadline: d.varint(), status: groupStatus(d.byte()), failOnTimeout: true}
		if version >= 2 {
			g.failOnTimeout, g.overdue = d.bool(), d.bool()
		}
		if d.err == nil && g.status > groupTimedOut {
			d.fail(fmt.Errorf("group %q: bad status %d", id, g.status))
		}
		for range d.length(1) {
			m := member{id: uuid.UUID(d.uuid()), data: d.bytes(), gen: d.uvarint(), left: d.bool()}
			g.members = append(g.members, m)
			g.dataSize += len(m.data)
		}
		g.derive() // the index and the gathered data are not encoded
		s.groups[id] = g
	}
}

// decodeKV reads what encodeKV wrote into the empty register of s.
func decodeKV(d *decoder, s *job) {
	keys := keyOrder{d: d, what: "key"}
	for range d.length(2) {
		key := keys.next(d.string())
		s.kv[key] = kvEntry{version: d.uvarint(), value: d.bytes()}
	}
}

// decodeTimeouts reads what encodeTimeouts wrote into the empty timeouts
// of s; check verifies the rounds.
func decodeTimeouts(d *decoder, s *job) {
	keys := keyOrder{d: d, what: "timed-out group"}
	for range d.length(1) {
		id := keys.next(d.string())
		var rounds []timedOutRound
		for range d.length(1) {
			r := timedOutRound{lastGen: d.uvarint(), until: d.varint()}
			for range d.length(2) {
				r.members = append(r.members, roundMember{id: uuid.UUID(d.uuid()), gen: d.uvarint()})
			}
			rounds = append(rounds, r)
		}
		if d.err != nil {
			return
		}
		s.timeouts[id] = rounds
	}
}

func decodeNodes(d *decoder, s *state, version uint64) {
	keys := keyOrder{d: d, what: "node"}
	for range d.length(1) {
		n := Registration{ID: keys.next(d.string()), RaftAddr: d.string(), APIAddr: d.string()}
		if version >= 5 {
			n.Version, n.Protocol = d.string(), d.uvarint()
		}
		s.nodes[n.ID] = n
	}
}

// decodeDedup reads the de-duplication table. Before version 3 an entry
// names no job: an entry of a job's command ran on the default job, job 1.
func decodeDedup(d *decoder, s *state, version uint64) {
	for range d.length(1) {
		c := &dedupClient{id: uuid.UUID(d.uuid()), lastSeen: d.varint(), floor: d.uvarint()}
		if version >= 6 {
			c.owner = d.uuid()
		}
		if version >= 9 {
			c.session = d.uvarint()
		}
		for range d.length(1) {
			e := dedupEntry{seq: d.uvarint(), typ: CmdType(d.byte()), code: Code(d.byte()), ignored: d.bool(), granted: d.bool(), taskID: int32(d.int())}
			if version >= 5 {
				e.epoch = d.epoch() // it may carry an era
			} else {
				e.epoch = d.int()
			}
			e.gen, e.clock = d.uvarint(), d.varint()
			switch {
			case version >= 3:
				e.job = d.uvarint()
			case lookup(e.typ) != nil && lookup(e.typ).jobScoped:
				e.job = 1
			}
			if version >= 8 && kvNumbered(e.typ, version) {
				e.num = d.varint()
			}
			if version >= 13 && (e.typ == TypeGetTask || e.typ == TypeRenewLease) {
				decodeBatch(d, &e)
			}
			c.entries = append(c.entries, e)
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
}

// keyOrder checks that map keys arrive in the strictly ascending order
// encodeState writes them in, so that no key is duplicated.
type keyOrder struct {
	d    *decoder
	what string
	last *string
}

func (k *keyOrder) next(key string) string {
	if k.d.err == nil && k.last != nil && key <= *k.last {
		k.d.fail(fmt.Errorf("%s %q out of order", k.what, key))
	}
	k.last = &key
	return key
}

// check verifies the invariants that apply maintains and that the queues
// alone do not show, in the cluster's part and in every job, so that
// Restore refuses a snapshot that no log could have produced instead of
// running into it later.
func (s *state) check() error {
	switch {
	case s.clock < 0 || s.clock > maxNow || s.graceUntil < 0 || s.graceUntil > s.clock+int64(MaxGrace):
		return fmt.Errorf("clock %d or grace %d out of range", s.clock, s.graceUntil)
	case len(s.jobs) > MaxJobsCeiling || len(s.nodes) > MaxNodes || s.dedup.n > s.dedupLimit():
		return errors.New("a table exceeds its limit")
	case s.era > MaxEra:
		return fmt.Errorf("era %d exceeds %d", s.era, MaxEra)
	}
	if err := s.limits.validate(); err != nil {
		return err
	}
	if err := s.checkSessions(); err != nil {
		return err
	}
	versions := make(map[uint64]bool)
	for _, name := range sortedKeys(s.jobs) {
		if err := s.jobs[name].check(); err != nil {
			return fmt.Errorf("job %q: %w", name, err)
		}
		if err := s.jobs[name].checkKV(versions); err != nil {
			return fmt.Errorf("job %q: %w", name, err)
		}
	}
	for _, id := range sortedKeys(s.nodes) {
		if err := validate(&RegisterNode{Node: s.nodes[id]}); err != nil {
			return err
		}
		if s.nodes[id].hasRelease() && !s.atLeast(Protocol2) {
			return fmt.Errorf("node %q: a release in the registry of a state at protocol level %d", id, s.protocol)
		}
	}
	seqs := make(map[uint64]bool, len(s.jobs))
	for _, name := range sortedKeys(s.jobs) {
		j := s.jobs[name]
		if j.seq == 0 || j.seq > s.jobSeq || seqs[j.seq] {
			return fmt.Errorf("job %q: number %d of %d, or twice", name, j.seq, s.jobSeq)
		}
		seqs[j.seq] = true
	}
	for c := s.dedup.head; c != nil; c = c.next {
		if len(c.entries) > DedupPerClient {
			return fmt.Errorf("dedup client %s: %d entries", c.id, len(c.entries))
		}
		if c.lastSeen > s.clock || c.prev != nil && c.lastSeen < c.prev.lastSeen {
			// Expiry takes clients from the head while they are old.
			return fmt.Errorf("dedup client %s: last seen at %d, out of order or after the clock %d", c.id, c.lastSeen, s.clock)
		}
		for _, e := range c.entries {
			if e.job > s.jobSeq {
				return fmt.Errorf("dedup client %s: job %d of %d", c.id, e.job, s.jobSeq)
			}
			if spec := lookup(e.typ); spec == nil || spec.since > s.protocol {
				return fmt.Errorf("dedup client %s: an outcome of %v in a state at protocol level %d", c.id, e.typ, s.protocol)
			}
			if e.num < 0 && e.typ != TypeKVAdd {
				return fmt.Errorf("dedup client %s: %v outcome of %d", c.id, e.typ, e.num)
			}
		}
	}
	return nil
}

// dedupLimit is how many clients the de-duplication table may hold at the
// state's protocol level.
func (s *state) dedupLimit() int {
	if s.atLeast(Protocol2) {
		return s.dedup.maxActive
	}
	return DedupMaxClients
}

// check verifies the invariants of one job.
func (j *job) check() error {
	if err := ValidateJobName(j.name); err != nil {
		return err
	}
	switch {
	case j.createdAt < 0 || j.lastActivity < j.createdAt || j.lastActivity > j.cluster.clock:
		return fmt.Errorf("created at %d, last active at %d, clock %d", j.createdAt, j.lastActivity, j.cluster.clock)
	case j.pass < 0 || (j.ds == nil && (j.pass != 0 || len(j.tasks) != 0)):
		return fmt.Errorf("pass %d and %d tasks without a dataset", j.pass, len(j.tasks))
	case len(j.uploads) > MaxUploads || len(j.groups) > MaxGroups || j.staged > MaxChunks:
		return errors.New("a table exceeds its limit")
	case (j.save.holder == "") != (j.save.deadline == 0) || len(j.save.holder) > MaxIDLen:
		return errors.New("bad save-model lease")
	}
	if j.ds != nil {
		if err := checkChunks(j.ds.paths, &j.ds.chunks); err != nil {
			return err
		}
		if err := validatePatterns(j.ds.patterns); err != nil {
			return err
		}
		if len(j.ds.patterns) != 0 && !j.cluster.atLeast(Protocol4) {
			return fmt.Errorf("dataset patterns in a state at protocol level %d", j.cluster.protocol)
		}
		if j.ds.params.hasOrder() && !j.cluster.atLeast(Protocol8) {
			return fmt.Errorf("a dataset's seed or shuffle in a state at protocol level %d", j.cluster.protocol)
		}
		if j.mix != nil {
			if !j.cluster.atLeast(Protocol9) {
				return fmt.Errorf("a mixture in a state at protocol level %d", j.cluster.protocol)
			}
			if err := j.checkMixture(); err != nil {
				return err
			}
		}
	}
	for i := range j.tasks {
		if t := &j.tasks[i]; t.passEpoch > t.epoch || (t.queue == qPending && t.deadline <= 0) {
			return fmt.Errorf("task %d: bad epoch or deadline", i+1)
		}
	}
	if last := j.queues[qPending].tail; last >= 0 && j.tasks[last].deadline > j.leaseEnd() {
		return errors.New("a pending lease ends after any new lease would")
	}
	for _, id := range sortedKeys(j.uploads) {
		u := j.uploads[id]
		if err := validateID("upload id", id); err != nil {
			return err
		}
		if err := checkChunks(u.paths, &u.chunks); err != nil {
			return err
		}
	}
	for _, id := range sortedKeys(j.groups) {
		if err := validateID("group id", id); err != nil {
			return err
		}
		if err := j.groups[id].check(j.cluster.nextGen); err != nil {
			return fmt.Errorf("group %q: %w", id, err)
		}
	}
	for _, id := range sortedKeys(j.timeouts) {
		if err := validateID("group id", id); err != nil {
			return err
		}
		if err := checkRounds(j.timeouts[id], j.cluster.nextGen); err != nil {
			return fmt.Errorf("timed-out group %q: %w", id, err)
		}
	}
	return nil
}

// checkRounds verifies the kept rounds of one group that timed out: at
// least one, in the order they timed out, each of 1 to MaxPeers members
// sorted by id whose generations belong to it.
func checkRounds(rounds []timedOutRound, nextGen uint64) error {
	if len(rounds) == 0 {
		return errors.New("no rounds")
	}
	var prev uint64
	for i, r := range rounds {
		if r.lastGen <= prev || r.lastGen > nextGen || r.until <= 0 || len(r.members) == 0 || len(r.members) > MaxPeers {
			return fmt.Errorf("round %d: last generation %d after %d of %d, retention %d, %d members", i, r.lastGen, prev, nextGen, r.until, len(r.members))
		}
		for k, m := range r.members {
			if m.id == uuid.Nil || m.gen <= prev || m.gen > r.lastGen || (k > 0 && compareRoundMember(r.members[k-1], m.id) >= 0) {
				return fmt.Errorf("round %d: bad member %s", i, m.id)
			}
		}
		prev = r.lastGen
	}
	return nil
}

func checkChunks(paths []string, chunks *chunkIndex) error {
	if chunks.len() > MaxChunks {
		return fmt.Errorf("%d chunks exceed %d", chunks.len(), MaxChunks)
	}
	for _, p := range paths {
		if p == "" || len(p) > MaxPathLen {
			return fmt.Errorf("path length %d out of range", len(p))
		}
	}
	return nil
}

// check verifies a group against the limits and the life cycle: complete
// exactly when numPeers members joined, members only marked gone when
// complete, and at least one member not gone.
func (g *group) check(nextGen uint64) error {
	switch {
	case g.numPeers < 1 || g.numPeers > MaxPeers || g.timeout <= 0 || g.timeout > MaxGroupTimeout:
		return errors.New("bad settings")
	case len(g.members) > g.numPeers || (g.status == groupComplete) != (len(g.members) == g.numPeers):
		return fmt.Errorf("%d of %d members in status %d", len(g.members), g.numPeers, g.status)
	case g.dataSize > MaxGroupData || g.active() == 0:
		return errors.New("bad data size or no active member")
	case g.overdue && (g.status != groupOpen || g.failOnTimeout):
		return errors.New("overdue but not an open group that outlives its timeout")
	}
	for i, m := range g.members {
		if m.id == uuid.Nil || m.gen == 0 || m.gen > nextGen || len(m.data) > MaxMemberData ||
			(m.left && g.status != groupComplete) || g.find(m.id) != i {
			return fmt.Errorf("bad member %s", m.id)
		}
	}
	return nil
}

// encodeNodes writes the node registry in id order; version 5 adds each
// node's release, which states below Protocol2 do not hold.
func encodeNodes(e *encoder, nodes map[string]Registration, version uint64) {
	e.uvarint(uint64(len(nodes)))
	for _, id := range sortedKeys(nodes) {
		n := nodes[id]
		e.string(n.ID)
		e.string(n.RaftAddr)
		e.string(n.APIAddr)
		if version >= 5 {
			e.string(n.Version)
			e.uvarint(n.Protocol)
		}
	}
}

// decodeBatch reads what a GetTask's or RenewLease's de-duplication entry
// keeps of a batch (version 13): the tasks leased after the first, and
// the outcomes of the finishes after the first or of every renewal, each
// no more than a batch may have.
func decodeBatch(d *decoder, e *dedupEntry) {
	b := &dedupBatch{}
	n := d.length(2)
	if n >= MaxTasksPerGet || n > 0 && e.typ != TypeGetTask {
		d.fail(fmt.Errorf("a %v entry of %d more tasks", e.typ, n))
		return
	}
	for range n {
		b.more = append(b.more, leasedRef{id: int32(d.int()), epoch: d.epoch()})
	}
	n = d.length(1)
	if n > MaxTasksPerGet {
		d.fail(fmt.Errorf("a %v entry of %d outcomes", e.typ, n))
		return
	}
	for range n {
		if v := d.varint(); v > 0 && v <= math.MaxUint8 {
			b.outcomes = append(b.outcomes, uint8(v))
		} else if d.err == nil {
			d.fail(fmt.Errorf("a %v entry's outcome %d", e.typ, v))
		}
	}
	if len(b.more)+len(b.outcomes) > 0 {
		e.batch = b
	}
}
