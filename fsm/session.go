package fsm

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Session bounds (Protocol6).
const (
	// MinSessionTTL and MaxSessionTTL bound a session's TTL.
	MinSessionTTL = time.Second
	MaxSessionTTL = time.Hour
	// MaxSessions bounds the sessions open at once, in the cluster.
	MaxSessions = 1 << 17
	// MaxSessionBatch bounds the sessions one ExpireSessions or
	// CheckpointSessions names.
	MaxSessionBatch = 8192
)

// session is one client process's session (Protocol6): what it leases
// under it (tasks, the save-model lease) and the keys it attaches are
// released in the one entry that ends it. Keep-alives are not in the
// state: the leader keeps them in memory (internal/sessions) and ends a
// session that misses them with ExpireSessions.
//
// A session's references are checked when it ends, not kept exact: a
// task it leased that was finished since, a key written again since, a
// save-model lease taken again since, no longer belong to it. Each
// reference names the job by name and number and what it held by the
// token it was held under (the task's epoch, the key's version, the save
// lease's deadline), which any later change replaces.
type session struct {
	id    uint64
	ttl   int64
	owner [16]byte
	// opened is the FSM time of the OpenSession; seen the FSM time of the
	// session's last replicated sign of life: its opening, a command
	// applied under it, or a CheckpointSessions naming it.
	opened, seen int64
	tasks        []taskRef
	keys         []keyRef
	saves        []saveRef
	// taskPrune and keyPrune are the lengths of tasks and keys at which
	// the references no longer held are next dropped: twice the live ones
	// at the last pruning. They are not in snapshots, which hold only the
	// live references (copyState), so a restored replica prunes at other
	// times than one that applied the log, with the same state.
	taskPrune, keyPrune int
}

// taskRef is a task leased under a session, by its job and its epoch.
type taskRef struct {
	job   string
	seq   uint64
	index int32
	epoch uint32
}

// keyRef is a key attached to a session, by its job and its version.
type keyRef struct {
	job     string
	seq     uint64
	key     string
	version uint64
}

// saveRef is a save-model lease granted under a session.
type saveRef struct {
	job      string
	seq      uint64
	holder   string
	deadline int64
}

// OpenSession opens a session of the given TTL for the client whose
// request it is (Protocol6); Result.Session is its id and Result.Lease
// its TTL. It needs a request id.
type OpenSession struct {
	Header
	TTL time.Duration
}

// CloseSession ends session ID at its client's request: the tasks it
// holds go back to todo, counting no failure, its keys are deleted and a
// save-model lease granted under it is released.
type CloseSession struct {
	Header
	ID uint64
}

// ExpireSessions ends the sessions whose keep-alives the leader stopped
// getting: as CloseSession, but each task a session held counts a failure,
// as a lease that ran out. Result.Ended counts the sessions that ended.
type ExpireSessions struct {
	Header
	IDs []uint64
}

// CheckpointSessions records that the leader got keep-alives of the
// sessions IDs: each one's sign of life moves to the clock, so that the
// next leader gives it a fresh TTL (see SessionInfo.Seen).
type CheckpointSessions struct {
	Header
	IDs []uint64
}

func (*OpenSession) Type() CmdType        { return TypeOpenSession }
func (*CloseSession) Type() CmdType       { return TypeCloseSession }
func (*ExpireSessions) Type() CmdType     { return TypeExpireSessions }
func (*CheckpointSessions) Type() CmdType { return TypeCheckpointSessions }

func (c *OpenSession) encode(e *encoder)        { e.varint(int64(c.TTL)) }
func (c *OpenSession) decode(d *decoder)        { c.TTL = time.Duration(d.varint()) }
func (c *CloseSession) encode(e *encoder)       { e.uvarint(c.ID) }
func (c *CloseSession) decode(d *decoder)       { c.ID = d.uvarint() }
func (c *ExpireSessions) encode(e *encoder)     { encodeIDs(e, c.IDs) }
func (c *ExpireSessions) decode(d *decoder)     { c.IDs = decodeIDs(d) }
func (c *CheckpointSessions) encode(e *encoder) { encodeIDs(e, c.IDs) }
func (c *CheckpointSessions) decode(d *decoder) { c.IDs = decodeIDs(d) }

func encodeIDs(e *encoder, ids []uint64) {
	e.uvarint(uint64(len(ids)))
	for _, id := range ids {
		e.uvarint(id)
	}
}

func decodeIDs(d *decoder) []uint64 {
	n := d.length(1)
	if d.err != nil || n == 0 {
		return nil
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = d.uvarint()
	}
	return ids
}

func (c *OpenSession) validate() error {
	if c.Request.IsZero() {
		return invalidf("opening a session needs a request id")
	}
	if c.Session != 0 {
		return invalidf("a session is not opened under a session")
	}
	return validateDuration("session ttl", c.TTL, MinSessionTTL, MaxSessionTTL)
}

func (c *CloseSession) validate() error {
	if c.ID == 0 {
		return invalidf("session id 0")
	}
	return nil
}

func (c *ExpireSessions) validate() error { return validateIDs(c.IDs) }

func (c *CheckpointSessions) validate() error { return validateIDs(c.IDs) }

func validateIDs(ids []uint64) error {
	if len(ids) == 0 || len(ids) > MaxSessionBatch {
		return invalidf("%d session ids: 1 to %d", len(ids), MaxSessionBatch)
	}
	if slices.Contains(ids, 0) {
		return invalidf("session id 0")
	}
	return nil
}

// openSession opens a session, numbered from the cluster's counter.
func (s *state) openSession(c *OpenSession) *Result {
	if len(s.sessions) >= MaxSessions {
		return errResult(limitf("MaxSessions", MaxSessions, "%d sessions are open", len(s.sessions)))
	}
	// From the era's floor, as the other counters (era.go): a session
	// id of the cluster a backup came from is never handed out again.
	s.sessionSeq = max(s.sessionSeq, s.era<<EraShift) + 1
	s.sessions[s.sessionSeq] = &session{id: s.sessionSeq, ttl: int64(c.TTL), owner: c.Request.Owner, opened: s.clock, seen: s.clock}
	return &Result{Session: s.sessionSeq, Lease: c.TTL}
}

func (s *state) closeSession(c *CloseSession) *Result {
	ss := s.sessions[c.ID]
	if ss == nil {
		return &Result{Ignored: true}
	}
	if c.Request.owned() && ss.owner != [16]byte{} && ss.owner != c.Request.Owner {
		return errResult(&refusal{msg: fmt.Sprintf("session %d: %v", c.ID, ErrForeignClient), err: ErrForeignClient})
	}
	s.endSession(ss, false)
	return &Result{Session: c.ID}
}

func (s *state) expireSessions(c *ExpireSessions) *Result {
	n := 0
	for _, id := range c.IDs {
		if ss := s.sessions[id]; ss != nil {
			s.endSession(ss, true)
			n++
		}
	}
	if n == 0 {
		return &Result{Ignored: true}
	}
	return &Result{Ended: n}
}

func (s *state) checkpointSessions(c *CheckpointSessions) *Result {
	for _, id := range c.IDs {
		if ss := s.sessions[id]; ss != nil {
			ss.seen = s.clock
		}
	}
	return &Result{}
}

// endSession ends ss: its tasks go back to todo (each counting a failure
// when it expired), its keys are deleted and its save-model leases
// released, in the order they were taken.
func (s *state) endSession(ss *session, expired bool) {
	var touched []*job
	for _, ref := range ss.tasks {
		j, i, ok := s.heldTask(ref)
		if !ok {
			continue
		}
		if expired {
			j.failTask(i)
			j.leasesExpired++
		} else {
			j.unlink(i)
			j.pushBack(qTodo, i)
		}
		if !slices.Contains(touched, j) {
			touched = append(touched, j)
		}
	}
	// In name order, so that no order of the references matters.
	slices.SortFunc(touched, func(a, b *job) int { return strings.Compare(a.name, b.name) })
	for _, j := range touched {
		j.maybeNextPass()
	}
	for _, ref := range ss.keys {
		if j := s.sessionJob(ref.job, ref.seq); j != nil {
			if e, ok := j.kv[ref.key]; ok && e.version == ref.version {
				j.kvRemove(ref.key, e)
			}
		}
	}
	for _, ref := range ss.saves {
		if j := s.sessionJob(ref.job, ref.seq); j != nil && j.save.holder == ref.holder && j.save.deadline == ref.deadline {
			j.account(-int64(len(j.save.holder)))
			j.save = saveLease{}
		}
	}
	delete(s.sessions, ss.id)
}

// sessionJob returns the job a reference names, while it is the same job.
func (s *state) sessionJob(name string, seq uint64) *job {
	if j := s.jobs[name]; j != nil && j.seq == seq {
		return j
	}
	return nil
}

// heldTask returns the task ref names while it is still held under the
// epoch it was leased with.
func (s *state) heldTask(ref taskRef) (*job, int32, bool) {
	j := s.sessionJob(ref.job, ref.seq)
	if j == nil || int(ref.index) >= len(j.tasks) {
		return nil, 0, false
	}
	t := &j.tasks[ref.index]
	return j, ref.index, t.queue == qHeld && t.epoch == ref.epoch
}

// checkSession refuses, before anything is looked up or applied, a
// request under a session that has ended (ErrSessionExpired) or that is
// another token's (ErrForeignClient), and a request whose de-duplication
// identity is bound to another session than the one it names.
func (s *state) checkSession(h *Header) error {
	if h.Session != 0 {
		ss := s.sessions[h.Session]
		if ss == nil {
			ss = endedSession(s, h.Session)
		}
		if ss == nil {
			return &refusal{msg: fmt.Sprintf("session %d: %v", h.Session, ErrSessionExpired), err: ErrSessionExpired}
		}
		if h.Request.owned() && ss.owner != [16]byte{} && ss.owner != h.Request.Owner {
			return &refusal{msg: fmt.Sprintf("session %d: %v", h.Session, ErrForeignClient), err: ErrForeignClient}
		}
	}
	if h.Request.IsZero() {
		return nil
	}
	cl := s.dedup.clients[h.Request.Client]
	if cl == nil || cl.session == h.Session {
		return nil
	}
	if cl.session != 0 && s.sessions[cl.session] == nil {
		return &refusal{msg: fmt.Sprintf("request id %s/%d is bound to session %d: %v", h.Request.Client, h.Request.Seq, cl.session, ErrSessionExpired), err: ErrSessionExpired}
	}
	return invalidf("request id %s/%d is bound to session %d, not %d", h.Request.Client, h.Request.Seq, cl.session, h.Session)
}

// afterSession records, for a command applied under a session, the sign
// of life and what it leased or attached: a task GetTask leased (held in
// qHeld), a save-model lease granted, the keys a register write with
// Attach stored.
func (s *state) afterSession(c Command, r *Result, seq uint64) {
	h := c.Hdr()
	ss := s.sessions[h.Session]
	if ss == nil {
		return
	}
	ss.seen = s.clock
	if r.Duplicate || seq == 0 {
		return
	}
	name := jobName(h.Job)
	j := s.jobs[name]
	if j == nil || j.seq != seq {
		return
	}
	switch c := c.(type) {
	case *GetTask:
		if r.Task != nil {
			ss.tasks = s.pruneTasks(ss.tasks, &ss.taskPrune)
			for _, t := range append([]*Task{r.Task}, r.More...) {
				i := int32(t.Meta.ID - 1)
				ss.tasks = append(ss.tasks, taskRef{job: name, seq: seq, index: i, epoch: j.tasks[i].epoch})
			}
		}
	case *RequestSaveModel:
		if r.Granted {
			ss.saves = append(s.liveSaves(ss), saveRef{job: name, seq: seq, holder: c.TrainerID, deadline: j.save.deadline})
		}
	}
	if h.Attach {
		for _, key := range keysWritten(c, r) {
			if e, ok := j.kv[key]; ok {
				ss.keys = append(s.pruneKeys(ss.keys, &ss.keyPrune), keyRef{job: name, seq: seq, key: key, version: e.version})
			}
		}
	}
}

// minPrune is the shortest list of references that is pruned.
const minPrune = 8

// pruneTasks drops the references to tasks no longer held once the list
// reaches *at, and sets *at to twice the references left, so that a long
// session's list stays within twice the most it held at once and pruning
// costs O(1) a reference appended, however many tasks the session holds.
func (s *state) pruneTasks(refs []taskRef, at *int) []taskRef {
	if len(refs) < max(*at, minPrune) {
		return refs
	}
	live := s.liveTasks(refs, refs[:0])
	clear(refs[len(live):])
	*at = 2 * len(live)
	return live
}

// liveTasks appends to dst the references of refs to tasks still held.
func (s *state) liveTasks(refs, dst []taskRef) []taskRef {
	for _, ref := range refs {
		if _, _, ok := s.heldTask(ref); ok {
			dst = append(dst, ref)
		}
	}
	return dst
}

// pruneKeys drops the references to keys written or deleted since, as
// pruneTasks does those to tasks.
func (s *state) pruneKeys(refs []keyRef, at *int) []keyRef {
	if len(refs) < max(*at, minPrune) {
		return refs
	}
	live := s.liveKeys(refs, refs[:0])
	clear(refs[len(live):])
	*at = 2 * len(live)
	return live
}

// liveKeys appends to dst the references of refs to keys not written or
// deleted since.
func (s *state) liveKeys(refs, dst []keyRef) []keyRef {
	for _, ref := range refs {
		if j := s.sessionJob(ref.job, ref.seq); j != nil && j.kv[ref.key].version == ref.version {
			dst = append(dst, ref)
		}
	}
	return dst
}

// liveSaves returns the session's save-model leases still held as granted.
func (s *state) liveSaves(ss *session) []saveRef {
	var live []saveRef
	for _, ref := range ss.saves {
		if j := s.sessionJob(ref.job, ref.seq); j != nil && j.save.holder == ref.holder && j.save.deadline == ref.deadline {
			live = append(live, ref)
		}
	}
	return live
}

// keysWritten returns the keys a register write stored.
func keysWritten(c Command, r *Result) []string {
	switch c := c.(type) {
	case *KVCompareAndSet:
		if r.Swapped {
			return []string{c.Key}
		}
	case *KVCompareValue:
		if r.Swapped {
			return []string{c.Key}
		}
	case *KVAdd:
		return []string{c.Key}
	case *KVAppend:
		return []string{c.Key}
	case *KVMultiSet:
		keys := make([]string, len(c.Pairs))
		for i, p := range c.Pairs {
			keys[i] = p.Key
		}
		return keys
	}
	return nil
}

// SessionInfo describes an open session.
type SessionInfo struct {
	ID  uint64
	TTL time.Duration
	// Owner is the token the session belongs to (a hash), zero without
	// tokens.
	Owner [16]byte
	// Opened is the FSM time of its opening. Seen is the FSM time of its
	// last replicated sign of life: its opening, a command applied under
	// it, or a CheckpointSessions. A new leader gives a fresh TTL only to a
	// session seen since the leader before it took over
	// (SessionGraces), so that leader churn cannot keep a dead session
	// alive: one that showed no life under a leader gets no second grace.
	Opened, Seen int64
	// Tasks are the tasks it holds, in the order it leased them.
	Tasks []HeldTask
	// Keys counts the keys attached to it.
	Keys int
}

// HeldTask is a task held by a session.
type HeldTask struct {
	Job  string
	Meta TaskMeta
	// Timeout is the job's task timeout: the leader revokes the task when
	// its holder reports no progress for that long.
	Timeout time.Duration
}

// Sessions returns the open sessions in id order.
func (f *FSM) Sessions() []SessionInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]SessionInfo, 0, len(f.s.sessions))
	for _, id := range sortedKeys(f.s.sessions) {
		out = append(out, f.s.sessionInfo(f.s.sessions[id]))
	}
	return out
}

// Session returns session id, if it is open.
func (f *FSM) Session(id uint64) (SessionInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ss := f.s.sessions[id]
	if ss == nil {
		return SessionInfo{}, false
	}
	return f.s.sessionInfo(ss), true
}

// SessionOpen reports whether session id is open, and its TTL and owner.
func (f *FSM) SessionOpen(id uint64) (ttl time.Duration, owner [16]byte, open bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ss := f.s.sessions[id]
	if ss == nil {
		return 0, owner, false
	}
	return time.Duration(ss.ttl), ss.owner, true
}

// SessionGraces returns the FSM times of the last two LeaderGrace
// entries, the latest first (0 where there was none): a new leader gives a
// fresh TTL to the sessions seen at or after previous.
func (f *FSM) SessionGraces() (latest, previous int64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.graces[0], f.s.graces[1]
}

func (s *state) sessionInfo(ss *session) SessionInfo {
	info := SessionInfo{ID: ss.id, TTL: time.Duration(ss.ttl), Owner: ss.owner, Opened: ss.opened, Seen: ss.seen}
	for _, ref := range ss.tasks {
		if j, i, ok := s.heldTask(ref); ok {
			info.Tasks = append(info.Tasks, HeldTask{Job: ref.job, Meta: TaskMeta{ID: int(i) + 1, Epoch: s.wireEpoch(j.tasks[i].epoch)}, Timeout: j.ds.params.TaskTimeout})
		}
	}
	for _, ref := range ss.keys {
		if j := s.sessionJob(ref.job, ref.seq); j != nil && j.kv[ref.key].version == ref.version {
			info.Keys++
		}
	}
	return info
}

// queuesIn is the number of task queues a snapshot of the version holds.
func queuesIn(version uint64) queueID {
	if version >= 9 {
		return numQueues
	}
	return queuesBefore9
}

// encodeSessions writes the session counter, the last two LeaderGrace
// times and every session in id order (snapshot version 9).
func encodeSessions(sw *snapWriter, s *state) {
	e := &sw.e
	e.uvarint(s.sessionSeq)
	e.varint(s.graces[0])
	e.varint(s.graces[1])
	e.uvarint(uint64(len(s.sessions)))
	for _, id := range sortedKeys(s.sessions) {
		ss := s.sessions[id]
		e.uvarint(ss.id)
		e.varint(ss.ttl)
		e.uuid(ss.owner)
		e.varint(ss.opened)
		e.varint(ss.seen)
		// Only the references still live, which a copy for a snapshot
		// already holds alone: how many stale ones a session keeps
		// depends on when it was last pruned, which a replica restored
		// from a snapshot does at other times.
		tasks, keys := ss.tasks, ss.keys
		if !s.forSnapshot {
			tasks, keys = s.liveTasks(tasks, nil), s.liveKeys(keys, nil)
		}
		e.uvarint(uint64(len(tasks)))
		for _, r := range tasks {
			e.string(r.job)
			e.uvarint(r.seq)
			e.int(int(r.index))
			e.uint32(r.epoch)
		}
		e.uvarint(uint64(len(keys)))
		for _, r := range keys {
			e.string(r.job)
			e.uvarint(r.seq)
			e.string(r.key)
			e.uvarint(r.version)
		}
		e.uvarint(uint64(len(ss.saves)))
		for _, r := range ss.saves {
			e.string(r.job)
			e.uvarint(r.seq)
			e.string(r.holder)
			e.varint(r.deadline)
		}
		sw.flushIfFull()
	}
}

// decodeSessions reads what encodeSessions wrote.
func decodeSessions(d *decoder, s *state) {
	s.sessionSeq = d.uvarint()
	s.graces = [2]int64{d.varint(), d.varint()}
	keys := keyOrder{d: d, what: "session"}
	for range d.length(1) {
		ss := &session{id: d.uvarint(), ttl: d.varint(), owner: d.uuid(), opened: d.varint(), seen: d.varint()}
		keys.next(fmt.Sprintf("%020d", ss.id))
		for range d.length(4) {
			ss.tasks = append(ss.tasks, taskRef{job: d.string(), seq: d.uvarint(), index: int32(d.int()), epoch: d.uint32()})
		}
		for range d.length(4) {
			ss.keys = append(ss.keys, keyRef{job: d.string(), seq: d.uvarint(), key: d.string(), version: d.uvarint()})
		}
		for range d.length(4) {
			ss.saves = append(ss.saves, saveRef{job: d.string(), seq: d.uvarint(), holder: d.string(), deadline: d.varint()})
		}
		if d.err != nil {
			return
		}
		if ss.id == 0 || ss.id > s.sessionSeq || ss.ttl < int64(MinSessionTTL) || ss.ttl > int64(MaxSessionTTL) || len(s.sessions) >= MaxSessions {
			d.fail(fmt.Errorf("bad session %d", ss.id))
			return
		}
		s.sessions[ss.id] = ss
	}
}

// checkSessions verifies, on restore, that every held task is held by
// exactly one session, so that a session's end releases each.
func (s *state) checkSessions() error {
	if len(s.sessions) != 0 && !s.atLeast(Protocol6) {
		return fmt.Errorf("sessions in a state at protocol level %d", s.protocol)
	}
	held := 0
	for _, name := range sortedKeys(s.jobs) {
		held += s.jobs[name].queues[qHeld].n
	}
	type key struct {
		job   string
		index int32
	}
	refs := make(map[key]bool, held)
	for _, id := range sortedKeys(s.sessions) {
		for _, ref := range s.sessions[id].tasks {
			if _, _, ok := s.heldTask(ref); ok {
				k := key{ref.job, ref.index}
				if refs[k] {
					return fmt.Errorf("task %d of job %q is held twice", ref.index+1, ref.job)
				}
				refs[k] = true
			}
		}
	}
	if len(refs) != held {
		return fmt.Errorf("sessions hold %d of the %d held tasks", len(refs), held)
	}
	return nil
}
