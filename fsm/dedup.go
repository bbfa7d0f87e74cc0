package fsm

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// dedupTable remembers recent request outcomes so that a retried command
// returns its first result and changes nothing.
//
// The memory is bounded and deterministic: per client the last
// DedupPerClient outcomes, each client forgotten after DedupWindow of FSM
// time without a request. Clients sit in a list ordered by last use, which
// is also the order of their last FSM times, so expiry and eviction are
// O(1) and need no map order. A request whose sequence number is at or
// below the highest one a client has forgotten (its floor) is refused
// rather than applied twice.
//
// At Protocol1 the table holds at most DedupMaxClients clients and
// evicts the least recently used one to take a new one, however recently
// it was used. From Protocol2 on, no client is forgotten within the
// window: a new client id is refused (ErrTooManyClients) while maxActive
// ids used within the window are held, and a client id the table does not
// hold is refused with a sequence number above 1 (ErrUnknownClient), so
// that a forgotten client's late retry is never applied as a new request.
type dedupTable struct {
	clients    map[uuid.UUID]*dedupClient
	head, tail *dedupClient // least and most recently used
	n          int
	// maxActive is DedupMaxActiveClients. It is not state (not
	// encoded): a build's constant, which tests lower to reach it.
	maxActive int
}

type dedupClient struct {
	id       uuid.UUID
	lastSeen int64
	floor    uint64 // highest forgotten sequence number
	// owner is the RequestID.Owner the client id is bound to (Protocol3):
	// that of its first request, or of its first request that carried
	// one. Zero while unbound.
	owner [16]byte
	// session is the session the client id is bound to (Protocol6): that
	// of its first request, 0 for none.
	session    uint64
	entries    []dedupEntry
	prev, next *dedupClient
}

// dedupEntry is the compact first outcome of one request.
type dedupEntry struct {
	seq     uint64
	typ     CmdType
	code    Code
	ignored bool
	// granted is RequestSaveModel's grant, or whether KVCompareAndSet or
	// KVCompareValue swapped.
	granted bool
	// taskID is GetTask's; task ids are below 2^31 (validateMeta).
	taskID int32
	epoch  int
	// gen is Join's generation; the version of the key that
	// KVCompareAndSet, KVCompareValue, KVAdd or KVAppend stored or found,
	// or that KVDelete deleted or found; the first version KVMultiSet
	// gave.
	gen uint64
	// num is the number the answer of a register write carries (kvNumber):
	// KVAdd's sum, KVAppend's length, the keys a delete deleted.
	num   int64
	clock int64
	job   uint64 // the seq of the job the command ran on, 0 for none
	// batch is what a batch (Protocol10) adds, nil for any other
	// outcome, so that an entry costs no more for it.
	batch *dedupBatch
}

// dedupBatch is what the de-duplication entry of a batch keeps beyond
// the first lease and finish.
type dedupBatch struct {
	// more are the tasks a GetTask leased after the entry's taskID.
	more []leasedRef
	// outcomes are those of a GetTask's MoreFinished, each packed as num
	// packs its Finished's (FinishOutcome.number); for a RenewLease with
	// More, each renewal's code, plus 1.
	outcomes []uint8
}

// leasedRef names one lease a GetTask granted: the task's id and its
// wire epoch.
type leasedRef struct {
	id    int32
	epoch int
}

func newDedupTable() dedupTable {
	return dedupTable{clients: make(map[uuid.UUID]*dedupClient), maxActive: DedupMaxActiveClients}
}

// lookup returns the replayed result of command c, whose request was seen
// before, nil for a new request, or an error for a request that is too old
// to tell.
func (t *dedupTable) lookup(req RequestID, c Command, s *state) (*Result, error) {
	typ := c.Type()
	cl := t.clients[req.Client]
	if cl == nil {
		if s.atLeast(Protocol2) {
			return nil, t.admit(req, max(s.clock, c.Hdr().Now))
		}
		return nil, nil
	}
	if req.owned() && cl.owner != [16]byte{} && cl.owner != req.Owner {
		return nil, &refusal{msg: fmt.Sprintf("request id %s/%d refused: %v", req.Client, req.Seq, ErrForeignClient), err: ErrForeignClient}
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

// unseen reports whether req may still be applied as a new request of a
// client the table holds: it is zero (no de-duplication), or its client
// holds no outcome of it and has not forgotten sequence numbers as high,
// and the client's owner is req's. A client the table does not hold is
// not: its first request must reach the log, which admits the client
// (admit refuses a first request numbered above 1, as a forgotten
// client's).
func (t *dedupTable) unseen(req RequestID) bool {
	if req.IsZero() {
		return true
	}
	cl := t.clients[req.Client]
	if cl == nil {
		return false
	}
	if req.owned() && cl.owner != [16]byte{} && cl.owner != req.Owner || req.Seq <= cl.floor {
		return false
	}
	for i := range cl.entries {
		if cl.entries[i].seq == req.Seq {
			return false
		}
	}
	return true
}

// admit decides, from Protocol2 on, whether a request under a client id
// the table does not hold may be applied at FSM time now: not with a
// sequence number above 1, which only a client that was forgotten (or that
// skipped its first request) sends, and not while the table holds
// maxActive clients used within DedupWindow of now.
func (t *dedupTable) admit(req RequestID, now int64) error {
	if req.Seq > 1 {
		return &refusal{msg: fmt.Sprintf("request id %s/%d refused: %v", req.Client, req.Seq, ErrUnknownClient), err: ErrUnknownClient}
	}
	if t.n-t.expiring(now, t.n-t.maxActive+1) >= t.maxActive {
		return &refusal{msg: fmt.Sprintf("request id %s/%d refused: %v (%d); retry later", req.Client, req.Seq, ErrTooManyClients, t.maxActive), err: ErrTooManyClients}
	}
	return nil
}

// expiring counts the clients that DedupWindow has passed for at now,
// least recently used first, stopping at limit: the list is in order of
// last use, so the first client still within the window ends the count.
func (t *dedupTable) expiring(now int64, limit int) int {
	n := 0
	for c := t.head; c != nil && n < limit && now-c.lastSeen > int64(DedupWindow); c = c.next {
		n++
	}
	return n
}

// result replays the first outcome for command c. An answer that grants
// something for a time is replayed as true only while it still holds at
// the FSM time of the retry, which is the later of the clock and c's
// stamp, in the job c addresses, and then with what remains of the lease
// at that time: a retried save-model request answers whether the caller
// holds the lease now, a retried GetTask or RenewLease whose lease has
// ended, or whose job was deleted (and maybe created again) since,
// answers ErrStaleEpoch. A KVCompareAndSet is replayed as replayKV says,
// a KVCompareValue as replayCompareValue says, the other register writes
// as replayKVWrite says. Anything else is replayed as it was.
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
		r.Finish = finishOutcome(e.num)
		b := e.batch
		if b == nil {
			b = &dedupBatch{}
		}
		for _, n := range b.outcomes {
			r.MoreFinish = append(r.MoreFinish, *finishOutcome(int64(n)))
		}
		if e.code != CodeOK {
			break
		}
		// The leases still held, in the order they were granted: the
		// first of them is the Task, the rest More; none left is a
		// stale epoch.
		for _, m := range append([]leasedRef{{id: e.taskID, epoch: e.epoch}}, b.more...) {
			i, ok := held(int(m.id), m.epoch)
			if !ok {
				continue
			}
			t := j.taskOf(i, now)
			if j.tasks[i].queue == qHeld {
				t.Session = c.Session
			}
			if r.Task == nil {
				r.Task = t
			} else {
				r.More = append(r.More, t)
			}
		}
		if r.Task == nil {
			r.Code = CodeStaleEpoch
		}
	case *RenewLease:
		if e.code != CodeOK {
			break
		}
		// lease is what remains of the lease m names, or a stale epoch
		// once it has ended.
		lease := func(m TaskMeta) (Code, time.Duration) {
			i, ok := held(m.ID, m.Epoch)
			switch {
			case ok && j.tasks[i].queue == qHeld:
				return CodeOK, s.heldLease(c.Session)
			case ok:
				return CodeOK, time.Duration(j.tasks[i].deadline - now)
			}
			return CodeStaleEpoch, 0
		}
		if len(c.More) == 0 {
			r.Code, r.Lease = lease(c.Meta)
			break
		}
		// Each renewal as it went, and, when it renewed, what remains.
		var codes []uint8
		if e.batch != nil {
			codes = e.batch.outcomes
		}
		for k, m := range append([]TaskMeta{c.Meta}, c.More...) {
			o := RenewOutcome{Code: CodeStaleEpoch}
			if k < len(codes) {
				o.Code = Code(codes[k] - 1)
			}
			if o.Code == CodeOK {
				o.Code, o.Lease = lease(m)
			}
			r.Renewed = append(r.Renewed, o)
		}
	case *KVCompareAndSet:
		return s.replayKV(c, e, r)
	case *KVCompareValue:
		return s.replayCompareValue(c, e, r)
	case *KVDelete, *KVDeletePrefix, *KVAdd, *KVMultiSet, *KVAppend:
		return replayKVWrite(c, e, r)
	case *OpenSession, *CloseSession:
		r.Session = e.gen
	case *ReportProgress:
		r.Recorded = int(e.num)
	case *CommitCursor:
		if e.code == CodeOK {
			r.Cursor = replayCursor(j, e, e.gen)
			r.Recorded = int(e.num)
		}
	case *RestoreCursor:
		if e.code == CodeOK {
			r.Cursor = replayCursor(j, e, c.ID)
			r.Generation, r.Recorded = e.gen, int(e.num)
		}
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
	if cl == nil || req.owned() && cl.owner != [16]byte{} && cl.owner != req.Owner {
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
// request. With lru (Protocol1), a client past DedupMaxClients evicts the
// least recently used one. Otherwise nothing is evicted: admit let a new
// client in only when fewer than maxActive are within the window, and the
// expire that ends every apply forgets the others.
func (t *dedupTable) record(req RequestID, typ CmdType, r *Result, now int64, job uint64, lru bool) {
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
	if c.owner == [16]byte{} {
		c.owner = req.Owner
	}
	e := dedupEntry{seq: req.Seq, typ: typ, code: r.Code, ignored: r.Ignored, granted: r.Granted, gen: r.Generation, clock: r.Clock, job: job}
	if r.Task != nil {
		e.taskID, e.epoch = int32(r.Task.Meta.ID), r.Task.Meta.Epoch
	}
	if len(r.More)+len(r.MoreFinish)+len(r.Renewed) > 0 {
		b := &dedupBatch{}
		if len(r.More) > 0 {
			b.more = make([]leasedRef, len(r.More))
			for k, t := range r.More {
				b.more[k] = leasedRef{id: int32(t.Meta.ID), epoch: t.Meta.Epoch}
			}
		}
		if n := len(r.MoreFinish) + len(r.Renewed); n > 0 {
			b.outcomes = make([]uint8, 0, n)
			for _, o := range r.MoreFinish {
				b.outcomes = append(b.outcomes, uint8(o.number()))
			}
			for _, o := range r.Renewed {
				b.outcomes = append(b.outcomes, uint8(1+o.Code))
			}
		}
		e.batch = b
	}
	if r.KV != nil {
		e.granted, e.gen = r.Swapped, r.KV.Version
	}
	if len(r.Versions) > 0 {
		e.gen = r.Versions[0]
	}
	if r.Session != 0 {
		e.gen = r.Session
	}
	if r.Cursor != nil {
		e.gen = r.Cursor.ID
		if typ == TypeRestoreCursor {
			e.gen = r.Generation
		}
	}
	e.num = kvNumber(typ, r)
	// A client retries only its latest request (a lane sends one write at
	// a time), so only its latest entry keeps a batch's further leases:
	// the table holds at most one batch of leases a client.
	if k := len(c.entries) - 1; k >= 0 && c.entries[k].batch != nil && c.entries[k].batch.more != nil {
		c.entries[k].batch = &dedupBatch{outcomes: c.entries[k].batch.outcomes}
	}
	if len(c.entries) == DedupPerClient {
		c.floor = max(c.floor, c.entries[0].seq)
		copy(c.entries, c.entries[1:])
		c.entries = c.entries[:len(c.entries)-1]
	}
	c.entries = append(c.entries, e)
	for lru && t.n > DedupMaxClients {
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

// ClientOwner reports whether this replica holds the client id, and the
// owner it is bound to (zero while unbound): a leader refuses a request of
// another owner before proposing it, and counts a client id it does not
// hold against its token's quota of new identities.
func (f *FSM) ClientOwner(id uuid.UUID) (owner [16]byte, held bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	cl := f.s.dedup.clients[id]
	if cl == nil {
		return owner, false
	}
	return cl.owner, true
}
