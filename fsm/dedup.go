package fsm

import (
	"time"

	"github.com/google/uuid"
)

// dedupTable remembers recent request outcomes so that a retried command
// returns its first result and changes nothing.
//
// The memory is bounded and deterministic: per client the last
// DedupPerClient outcomes, for at most DedupMaxClients clients, each
// forgotten after DedupWindow of FSM time without a request. Clients sit in
// a list ordered by last use, so eviction is O(1) and needs no map order. A
// request whose sequence number is at or below the highest one a client has
// forgotten is refused rather than applied twice.
type dedupTable struct {
	clients    map[uuid.UUID]*dedupClient
	head, tail *dedupClient // least and most recently used
	n          int
}

type dedupClient struct {
	id         uuid.UUID
	lastSeen   int64
	floor      uint64 // highest forgotten sequence number
	entries    []dedupEntry
	prev, next *dedupClient
}

// dedupEntry is the compact first outcome of one request.
type dedupEntry struct {
	seq     uint64
	typ     CmdType
	code    Code
	ignored bool
	// granted is RequestSaveModel's grant, or whether KVCompareAndSet
	// swapped.
	granted bool
	taskID  int
	epoch   int
	// gen is Join's generation, or the version of the key that
	// KVCompareAndSet stored or found.
	gen   uint64
	clock int64
	job   uint64 // the seq of the job the command ran on, 0 for none
}

func newDedupTable() dedupTable {
	return dedupTable{clients: make(map[uuid.UUID]*dedupClient)}
}

// lookup returns the replayed result of command c, whose request was seen
// before, nil for a new request, or an error for a request that is too old
// to tell.
func (t *dedupTable) lookup(req RequestID, c Command, s *state) (*Result, error) {
	typ := c.Type()
	cl := t.clients[req.Client]
	if cl == nil {
		return nil, nil
	}
	for i := range cl.entries {
		e := &cl.entries[i]
		if e.seq != req.Seq {
			continue
		}
		if e.typ != typ {
			return nil, invalidf("request id %s/%d was used for %v, not %v", req.Client, req.Seq, e.typ, typ)
		}
		return e.result(c, s), nil
	}
	if req.Seq <= cl.floor {
		return nil, invalidf("request id %s/%d is too old to be de-duplicated", req.Client, req.Seq)
	}
	return nil, nil
}

// result replays the first outcome for command c. An answer that grants
// something for a time is replayed as true only while it still holds at
// the FSM time of the retry, which is the later of the clock and c's
// stamp, in the job c addresses, and then with what remains of the lease
// at that time: a retried save-model request answers whether the caller
// holds the lease now, a retried GetTask or RenewLease whose lease has
// ended, or whose job was deleted (and maybe created again) since,
// answers ErrStaleEpoch. A KVCompareAndSet is replayed as replayKV says.
// Anything else is replayed as it was.
func (e *dedupEntry) result(c Command, s *state) *Result {
	r := &Result{Code: e.code, Ignored: e.ignored, Granted: e.granted, Generation: e.gen, Duplicate: true, Clock: e.clock}
	now := max(s.clock, c.Hdr().Now)
	j := s.jobs[jobName(c.Hdr().Job)]
	// held reports whether the lease of task id under epoch, granted in
	// the entry's job, is still held.
	held := func(id, epoch int) (int32, bool) {
		if j == nil || j.seq != e.job {
			return 0, false
		}
		return j.leaseHeld(id, epoch, now)
	}
	switch c := c.(type) {
	case *RequestSaveModel:
		r.Granted = j != nil && j.save.holder == c.TrainerID && j.save.deadline > now
		if r.Granted {
			r.Lease = time.Duration(j.save.deadline - now)
		}
	case *GetTask:
		if e.code != CodeOK {
			break
		}
		if i, ok := held(e.taskID, e.epoch); ok {
			r.Task = j.taskOf(i, now)
		} else {
			r.Code = CodeStaleEpoch
		}
	case *RenewLease:
		if e.code != CodeOK {
			break
		}
		if i, ok := held(c.Meta.ID, c.Meta.Epoch); ok {
			r.Lease = time.Duration(j.tasks[i].deadline - now)
		} else {
			r.Code = CodeStaleEpoch
		}
	case *KVCompareAndSet:
		return s.replayKV(c, e, r)
	}
	return r
}

// DatasetOutcome returns the first outcome of the dataset request req
// (its SetDataset, or the DatasetCommit that ends its upload) as a
// duplicate, when this replica remembers it: a retry is answered with it
// before anything is indexed or proposed, as the retried entry would be
// answered.
func (f *FSM) DatasetOutcome(req RequestID) (*Result, bool) {
	if req.IsZero() {
		return nil, false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	cl := f.s.dedup.clients[req.Client]
	if cl == nil {
		return nil, false
	}
	for _, e := range cl.entries {
		if e.seq == req.Seq && (e.typ == TypeSetDataset || e.typ == TypeDatasetCommit) {
			return &Result{Code: e.code, Ignored: e.ignored, Duplicate: true, Clock: e.clock}, true
		}
	}
	return nil, false
}

// record remembers the outcome r, in the job numbered job, of a new
// request.
func (t *dedupTable) record(req RequestID, typ CmdType, r *Result, now int64, job uint64) {
	c := t.clients[req.Client]
	if c == nil {
		c = &dedupClient{id: req.Client}
		t.clients[req.Client] = c
		t.n++
	} else {
		t.unlink(c)
	}
	t.pushBack(c)
	c.lastSeen = now
	e := dedupEntry{seq: req.Seq, typ: typ, code: r.Code, ignored: r.Ignored, granted: r.Granted, gen: r.Generation, clock: r.Clock, job: job}
	if r.Task != nil {
		e.taskID, e.epoch = r.Task.Meta.ID, r.Task.Meta.Epoch
	}
	if r.KV != nil {
		e.granted, e.gen = r.Swapped, r.KV.Version
	}
	if len(c.entries) == DedupPerClient {
		c.floor = max(c.floor, c.entries[0].seq)
		copy(c.entries, c.entries[1:])
		c.entries = c.entries[:len(c.entries)-1]
	}
	c.entries = append(c.entries, e)
	for t.n > DedupMaxClients {
		t.forget(t.head)
	}
}

// expire forgets clients not seen within DedupWindow of now.
func (t *dedupTable) expire(now int64) {
	for t.head != nil && now-t.head.lastSeen > int64(DedupWindow) {
		t.forget(t.head)
	}
}

func (t *dedupTable) forget(c *dedupClient) {
	t.unlink(c)
	delete(t.clients, c.id)
	t.n--
}

func (t *dedupTable) pushBack(c *dedupClient) {
	c.prev, c.next = t.tail, nil
	if t.tail != nil {
		t.tail.next = c
	} else {
		t.head = c
	}
	t.tail = c
}

func (t *dedupTable) unlink(c *dedupClient) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		t.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		t.tail = c.prev
	}
	c.prev, c.next = nil, nil
}
