package fsm

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// model is a slow reference for the FSM, written from the package
// documentation with plain slices and maps: no intrusive lists, no
// incremental counters, no snapshot code. The property tests apply every
// entry to both and compare results and queries. It reuses validate and
// Decode: the fixed limits are covered by the table tests, and of the
// replicated Limits it models the counts and JobTTL, not the size
// estimate.
type model struct {
	clock   int64
	graceTo int64 // no task lease granted before it ends earlier
	nextGen uint64
	nodes   map[string]Registration
	clients []*modelClient // least recently used first
	limits  Limits
	jobs    map[string]*modelJob
	jobSeq  uint64 // numbers the jobs created
	ranOn   uint64 // the seq of the job the last command ran on
	// kvVersion is the last version a register write was given.
	kvVersion uint64
	// protocol is the cluster's protocol level.
	protocol uint64
	// maxActive bounds the clients used within DedupWindow from
	// Protocol2 on (DedupMaxActiveClients, or what a test lowered it to).
	maxActive int
}

// modelSince gives the protocol level from which each command type added
// after Protocol1 may be applied.
var modelSince = map[CmdType]uint64{
	TypeKVDelete: Protocol5, TypeKVDeletePrefix: Protocol5, TypeKVAdd: Protocol5,
	TypeKVMultiSet: Protocol5, TypeKVAppend: Protocol5, TypeKVCompareValue: Protocol5,
	TypeOpenSession: Protocol6, TypeCloseSession: Protocol6, TypeExpireSessions: Protocol6, TypeCheckpointSessions: Protocol6,
	TypeReportProgress: Protocol7, TypeCommitCursor: Protocol7, TypeRestoreCursor: Protocol7, TypeDeleteCursor: Protocol7,
}

// modelJob is one job of the model. It embeds the model, so that its
// methods read the clock and the generations.
type modelJob struct {
	*model
	seq                     uint64
	createdAt, lastActivity int64

	ds      *modelDataset
	pass    int
	tasks   []modelTask
	todo    []int // task indexes in dispatch order
	pending []int // by deadline, ties in arrival order
	uploads map[string]*modelUpload
	holder  string
	saveEnd int64
	groups  map[string]*modelGroup
	// timeouts are the kept rounds of hard-deadline groups that timed
	// out (Protocol2), by group id, oldest first.
	timeouts map[string][]modelRound
	kv       map[string]KVValue
}

// modelRound is a kept round that timed out: each member's generation
// then, every generation of the round being at most lastGen.
type modelRound struct {
	lastGen uint64
	until   int64
	gens    map[uuid.UUID]uint64
}

type modelDataset struct {
	params   DatasetParams
	patterns []string
	chunks   []Chunk
}

type modelTask struct {
	queue                      string
	epoch, passEpoch, failures int
	deadline                   int64
}

type modelUpload struct {
	parts   uint32
	chunks  []Chunk
	touched int64
}

type modelGroup struct {
	numPeers      int
	timeout       time.Duration
	deadline      int64
	status        string
	failOnTimeout bool
	overdue       bool
	members       []modelMember
}

type modelMember struct {
	id   uuid.UUID
	data []byte
	gen  uint64
	left bool
}

type modelClient struct {
	id       uuid.UUID
	lastSeen int64
	floor    uint64
	owner    [16]byte // the first owner its requests carried (Protocol3)
	seen     []modelSeen
}

type modelSeen struct {
	seq uint64
	typ CmdType
	r   Result
	job uint64 // the seq of the job the request ran on
}

func newModel() *model {
	return &model{nodes: map[string]Registration{}, jobs: map[string]*modelJob{}, protocol: Protocol1, maxActive: DedupMaxActiveClients}
}

func (m *model) newJob() *modelJob {
	return &modelJob{model: m, createdAt: m.clock, lastActivity: m.clock,
		uploads: map[string]*modelUpload{}, groups: map[string]*modelGroup{}, timeouts: map[string][]modelRound{}, kv: map[string]KVValue{}}
}

var (
	invalidResult = Result{Code: CodeInvalid}
	ignoredResult = Result{Ignored: true}
	limitResult   = Result{Code: CodeLimit}
)

func codeResult(err error) Result { return Result{Code: CodeOf(err)} }

// apply applies one log entry and returns the expected result.
func (m *model) apply(b []byte) Result {
	c, err := Decode(b)
	if errors.Is(err, errUnknownType) {
		return ignoredResult
	}
	if err != nil || validate(c) != nil {
		return invalidResult
	}
	if modelSince[c.Type()] > m.protocol {
		return invalidResult
	}
	if h := c.Hdr(); (h.Session != 0 || h.Attach) && m.protocol < Protocol6 {
		return invalidResult // a session is a field of Protocol6
	}
	if meta, ok := metaOf(c); ok && meta.Epoch > math.MaxInt32 && m.protocol < Protocol2 {
		return invalidResult // the epochs of Protocol1
	}
	if rn, ok := c.(*RegisterNode); ok && (rn.Node.Version != "" || rn.Node.Protocol != 0) && m.protocol < Protocol2 {
		// A node's release is a field of Protocol2, which earlier
		// releases refuse as trailing bytes.
		return invalidResult
	}
	if patterns := datasetPatterns(c); len(patterns) != 0 && m.protocol < Protocol4 {
		return invalidResult // patterns are a field of Protocol4
	}
	if p, ok := datasetParams(c); ok && (p.Shuffle || p.Seed != 0) && m.protocol < Protocol8 {
		return invalidResult // a seed and shuffle are fields of Protocol8
	}
	if p, ok := datasetParams(c); ok && len(p.Sources) > 0 && m.protocol < Protocol9 {
		return invalidResult // sources are a field of Protocol9
	}
	if g, ok := c.(*GetTask); ok && g.Finished.ID != 0 && m.protocol < Protocol9 {
		return invalidResult // a finish riding a GetTask is a field of Protocol9
	}
	if g, ok := c.(*GetTask); ok && (g.Count > 1 || len(g.MoreFinished) > 0) && m.protocol < Protocol10 {
		return invalidResult // a batch is a field of Protocol10
	}
	if r, ok := c.(*RenewLease); ok && len(r.More) > 0 && m.protocol < Protocol10 {
		return invalidResult // more leases are a field of Protocol10
	}
	req := c.Hdr().Request
	if req.Owner != [16]byte{} && m.protocol < Protocol3 {
		return invalidResult // an owner is a field of Protocol3
	}
	if cl := m.client(req.Client); !req.IsZero() && cl != nil && req.Owner != [16]byte{} && cl.owner != [16]byte{} && cl.owner != req.Owner {
		return Result{Code: CodeForeignClient}
	}
	if cl := m.client(req.Client); !req.IsZero() && cl != nil {
		for _, s := range cl.seen {
			if s.seq == req.Seq {
				if s.typ != c.Type() {
					return invalidResult
				}
				r := s.r
				r.Duplicate = true
				r.Collected = nil // collected once, by the first
				return m.replay(c, r, s.job)
			}
		}
		if req.Seq <= cl.floor {
			return invalidResult
		}
	}
	if !req.IsZero() && m.client(req.Client) == nil && m.protocol >= Protocol2 {
		// A client id the table does not hold: refused past sequence 1,
		// and while the table holds maxActive clients within the window.
		now := max(m.clock, c.Hdr().Now)
		active := 0
		for _, cl := range m.clients {
			if now-cl.lastSeen <= int64(DedupWindow) {
				active++
			}
		}
		switch {
		case req.Seq > 1:
			return Result{Code: CodeUnknownClient}
		case active >= m.maxActive:
			return Result{Code: CodeTooManyClients}
		}
	}
	before := m.clock
	m.clock = max(m.clock, c.Hdr().Now)
	r := m.dispatch(c)
	if r.Code == CodeInvalid || r.Code == CodeLimit {
		m.clock = before
		return r
	}
	if !req.IsZero() {
		m.remember(req, c.Type(), r)
	}
	for len(m.clients) > 0 && m.clock-m.clients[0].lastSeen > int64(DedupWindow) {
		m.clients = m.clients[1:]
	}
	return r
}

// replay adjusts a replayed answer that grants something for a time to
// what still holds at the retry's FSM time, in the job the retry
// addresses, if that is still the job (seq) the first answer came from.
func (m *model) replay(c Command, r Result, seq uint64) Result {
	now := max(m.clock, c.Hdr().Now)
	j := m.jobs[jobName(c.Hdr().Job)]
	held := func(meta TaskMeta) (*modelTask, bool) {
		if j == nil || j.seq != seq || j.ds == nil || meta.ID < 1 || meta.ID > len(j.tasks) {
			return nil, false
		}
		t := &j.tasks[meta.ID-1]
		return t, t.queue == "pending" && t.epoch == meta.Epoch && t.deadline > now
	}
	switch c := c.(type) {
	case *RequestSaveModel:
		r.Granted = j != nil && j.holder == c.TrainerID && j.saveEnd > now
		r.Lease = 0
		if r.Granted {
			r.Lease = time.Duration(j.saveEnd - now) // what remains at the retry
		}
	case *GetTask:
		if r.Code != CodeOK {
			break
		}
		// The leases still held, in the order granted: the first is the
		// Task; none is a stale epoch.
		leased := append([]*Task{r.Task}, r.More...)
		r.Task, r.More = nil, nil
		for _, first := range leased {
			t, ok := held(first.Meta)
			if !ok {
				continue
			}
			task := *first
			task.Lease = time.Duration(t.deadline - now)
			if r.Task == nil {
				r.Task = &task
			} else {
				r.More = append(r.More, &task)
			}
		}
		if r.Task == nil {
			r.Code = CodeStaleEpoch
		}
	case *RenewLease:
		if r.Code != CodeOK {
			break
		}
		if len(c.More) > 0 {
			// Each renewal as it went; one that renewed, what remains.
			renewed := slices.Clone(r.Renewed)
			for k, meta := range append([]TaskMeta{c.Meta}, c.More...) {
				if renewed[k].Code != CodeOK {
					continue
				}
				if t, ok := held(meta); ok {
					renewed[k].Lease = time.Duration(t.deadline - now)
				} else {
					renewed[k] = RenewOutcome{Code: CodeStaleEpoch}
				}
			}
			r.Renewed = renewed
			break
		}
		if t, ok := held(c.Meta); ok {
			r.Lease = time.Duration(t.deadline - now) // what remains at the retry
		} else {
			r.Code, r.Lease = CodeStaleEpoch, 0
		}
	case *KVCompareAndSet:
		var cur KVValue
		if j != nil {
			cur = j.kv[c.Key]
		}
		switch {
		case r.Swapped && cur.Version != r.KV.Version:
			// Overwritten since: the value the retry carries.
			r.KV = &KVValue{Found: true, Value: c.Value, Version: r.KV.Version}
		case r.Swapped:
		case cur.Version == c.Version:
			// Not swapped, but the key as it is now would say it should
			// have.
			return invalidResult
		default:
			r.KV = &cur // not swapped: the key as it is now
		}
	case *KVCompareValue:
		var cur KVValue
		if j != nil {
			cur = j.kv[c.Key]
		}
		switch {
		case r.Swapped && cur.Version != r.KV.Version:
			r.KV = &KVValue{Found: true, Value: c.Desired, Version: r.KV.Version}
		case r.Swapped:
		case valueMatches(cur, c.Expected):
			return invalidResult // the key as it is now would say it should have swapped
		default:
			r.KV = &cur
		}
	}
	// Every other register write is replayed as it was: its answer is
	// the first outcome, whatever the key holds now.
	return r
}

// valueMatches reports whether cur is what a KVCompareValue expecting
// expected swaps: the value expected, or absent when it is empty.
func valueMatches(cur KVValue, expected []byte) bool {
	if !cur.Found {
		return len(expected) == 0
	}
	return bytes.Equal(cur.Value, expected)
}

func (m *model) client(id uuid.UUID) *modelClient {
	i := slices.IndexFunc(m.clients, func(c *modelClient) bool { return c.id == id })
	if i < 0 {
		return nil
	}
	return m.clients[i]
}

func (m *model) remember(req RequestID, typ CmdType, r Result) {
	cl := m.client(req.Client)
	if cl == nil {
		cl = &modelClient{id: req.Client}
	} else {
		m.clients = slices.DeleteFunc(m.clients, func(c *modelClient) bool { return c == cl })
	}
	m.clients = append(m.clients, cl)
	cl.lastSeen = m.clock
	if cl.owner == [16]byte{} {
		cl.owner = req.Owner
	}
	if len(cl.seen) == DedupPerClient {
		cl.floor = max(cl.floor, cl.seen[0].seq)
		cl.seen = cl.seen[1:]
	}
	// Only a client's latest outcome keeps the further leases of a
	// batch: a retry of an older one gets its first lease alone.
	if k := len(cl.seen) - 1; k >= 0 && len(cl.seen[k].r.More) > 0 {
		cl.seen[k].r.More = nil
	}
	cl.seen = append(cl.seen, modelSeen{seq: req.Seq, typ: typ, r: r, job: m.ranOn})
}

func (m *model) dispatch(c Command) Result {
	m.ranOn = 0
	switch c := c.(type) {
	case *Tick:
		return m.tick()
	case *RegisterNode:
		if _, ok := m.nodes[c.Node.ID]; !ok && len(m.nodes) >= MaxNodes {
			return invalidResult
		}
		m.nodes[c.Node.ID] = c.Node
		return Result{}
	case *RemoveNode:
		if _, ok := m.nodes[c.ID]; !ok {
			return ignoredResult
		}
		delete(m.nodes, c.ID)
		return Result{}
	case *LeaderGrace:
		m.grace(c.Grace)
		return Result{}
	case *SetLimits:
		m.limits = c.Limits
		return Result{}
	case *SetProtocol:
		if c.Level <= m.protocol {
			return ignoredResult
		}
		m.protocol = c.Level
		return Result{}
	}
	name := jobName(c.Hdr().Job)
	j := m.jobs[name]
	exists := j != nil
	creates := false
	switch c.(type) {
	case *SetDataset, *DatasetPart, *RequestSaveModel, *Join, *CreateJob, *KVCompareAndSet,
		*KVAdd, *KVMultiSet, *KVAppend, *KVCompareValue:
		creates = true
	}
	if !exists {
		// From Protocol2 a compare-and-set that expects a version, or a
		// value, cannot create the job, and is answered as on an empty
		// job.
		kv, isKV := c.(*KVCompareAndSet)
		cv, isCV := c.(*KVCompareValue)
		createsNothing := m.protocol >= Protocol2 && (isKV && kv.Version != 0 || isCV && len(cv.Expected) != 0)
		if creates && !createsNothing && len(m.jobs) >= m.limits.Effective().MaxJobs {
			return limitResult
		}
		j = m.newJob()
	}
	var r Result
	switch c := c.(type) {
	case *CreateJob:
		if exists {
			r = ignoredResult
		}
	case *DeleteJob:
		if !exists {
			return codeResult(ErrUnknownJob)
		}
		delete(m.jobs, name)
		return Result{}
	default:
		r = j.dispatch(c)
	}
	if r.Code == CodeInvalid || r.Code == CodeLimit {
		return r
	}
	if creates && !exists && !r.Ignored {
		m.jobSeq++
		j.seq = m.jobSeq
		m.jobs[name] = j
	}
	j.lastActivity = m.clock
	m.ranOn = j.seq
	return r
}

func (m *modelJob) dispatch(c Command) Result {
	switch c := c.(type) {
	case *SetDataset:
		if m.ds != nil {
			return ignoredResult
		}
		if r, ok := m.checkDataset(c.Params, len(c.Chunks)); !ok {
			return r
		}
		m.install(c.Params, c.Patterns, c.Chunks)
	case *DatasetPart:
		return m.part(c)
	case *DatasetCommit:
		return m.commit(c)
	case *GetTask:
		if c.JobNumber != 0 {
			switch {
			case m.protocol < Protocol2:
				return invalidResult // older replicas cannot decode it
			case c.JobNumber != m.seq: // 0 while the job does not exist
				return codeResult(ErrUnknownJob)
			}
		}
		// A finish it carries is applied first, as a TaskFinished, and
		// its outcome rides the answer.
		var finish *FinishOutcome
		var more []FinishOutcome
		if c.Finished.ID != 0 {
			fr := m.finish(c.Finished)
			finish = &FinishOutcome{Code: fr.Code, Ignored: fr.Ignored}
			for _, meta := range c.MoreFinished {
				fr := m.finish(meta)
				more = append(more, FinishOutcome{Code: fr.Code, Ignored: fr.Ignored})
			}
		}
		// A batch leases as that many GetTasks would, stopping at the
		// first that leases nothing.
		r := m.getTask(c.Pass)
		for n := 1; n < c.Count && r.Code == CodeOK; n++ {
			next := m.getTask(c.Pass)
			if next.Code != CodeOK {
				break
			}
			r.More = append(r.More, next.Task)
		}
		r.Finish, r.MoreFinish = finish, more
		return r
	case *TaskFinished:
		return m.finish(c.Meta)
	case *TaskFailed:
		return m.fail(c.Meta)
	case *RenewLease:
		if len(c.More) == 0 {
			return m.renew(c.Meta)
		}
		// Each renewal as a RenewLease of it alone, the answer saying how
		// each went; a job without a dataset answers as for one.
		if m.ds == nil {
			return codeResult(ErrNoDataset)
		}
		var r Result
		for _, meta := range append([]TaskMeta{c.Meta}, c.More...) {
			one := m.renew(meta)
			r.Renewed = append(r.Renewed, RenewOutcome{Code: one.Code, Lease: one.Lease})
		}
		return r
	case *RequestSaveModel:
		if m.holder != "" && m.holder != c.TrainerID && m.saveEnd > m.clock {
			return Result{}
		}
		m.holder, m.saveEnd = c.TrainerID, m.clock+int64(c.BlockDur)
		return Result{Granted: true, Lease: c.BlockDur}
	case *Join:
		return m.join(c)
	case *Leave:
		return m.leave(c)
	case *KVCompareAndSet:
		return m.compareAndSet(c)
	case *KVDelete:
		cur := m.kv[c.Key]
		if !cur.Found || c.Version != 0 && cur.Version != c.Version {
			return Result{Ignored: true, KV: &KVValue{Found: cur.Found, Version: cur.Version}}
		}
		delete(m.kv, c.Key)
		return Result{Deleted: 1, KV: &KVValue{Found: true, Version: cur.Version}}
	case *KVDeletePrefix:
		n := 0
		for key := range m.kv {
			if strings.HasPrefix(key, c.Prefix) {
				delete(m.kv, key)
				n++
			}
		}
		if n == 0 {
			return ignoredResult
		}
		return Result{Deleted: n}
	case *KVAdd:
		return m.add(c)
	case *KVMultiSet:
		return m.multiSet(c)
	case *KVAppend:
		l := m.limits.Effective()
		cur := m.kv[c.Key]
		switch {
		case int64(len(c.Value)) > l.MaxKVValueBytes, int64(len(cur.Value)+len(c.Value)) > l.MaxKVValueBytes:
			return limitResult
		case !cur.Found && len(m.kv) >= l.MaxJobKVKeys:
			return limitResult
		}
		v := m.put(c.Key, append(slices.Clone(cur.Value), c.Value...))
		return Result{Length: len(v.Value), KV: &KVValue{Found: true, Version: v.Version}}
	case *KVCompareValue:
		l := m.limits.Effective()
		if int64(len(c.Desired)) > l.MaxKVValueBytes {
			return limitResult
		}
		cur := m.kv[c.Key]
		if !valueMatches(cur, c.Expected) {
			return Result{Ignored: true, KV: &cur}
		}
		if !cur.Found && len(m.kv) >= l.MaxJobKVKeys {
			return limitResult
		}
		v := m.put(c.Key, c.Desired)
		return Result{Swapped: true, KV: &v}
	}
	return Result{}
}

// put stores value under key under the next version.
func (m *modelJob) put(key string, value []byte) KVValue {
	m.kvVersion++
	v := KVValue{Found: true, Value: value, Version: m.kvVersion}
	m.kv[key] = v
	return v
}

// add adds to the decimal integer under the key, 0 when absent.
func (m *modelJob) add(c *KVAdd) Result {
	cur := m.kv[c.Key]
	var base int64
	if cur.Found {
		b, err := strconv.ParseInt(string(cur.Value), 10, 64)
		if err != nil {
			return invalidResult
		}
		base = b
	}
	if c.Delta > 0 && base > math.MaxInt64-c.Delta || c.Delta < 0 && base < math.MinInt64-c.Delta {
		return invalidResult
	}
	sum := base + c.Delta
	value := []byte(strconv.FormatInt(sum, 10))
	l := m.limits.Effective()
	if int64(len(value)) > l.MaxKVValueBytes || !cur.Found && len(m.kv) >= l.MaxJobKVKeys {
		return limitResult
	}
	v := m.put(c.Key, value)
	return Result{Sum: sum, KV: &v}
}

// multiSet stores every pair or none.
func (m *modelJob) multiSet(c *KVMultiSet) Result {
	l := m.limits.Effective()
	total, added := 0, 0
	for _, p := range c.Pairs {
		total += len(p.Value)
		if !m.kv[p.Key].Found {
			added++
		}
	}
	if int64(total) > l.MaxKVValueBytes || added > 0 && len(m.kv)+added > l.MaxJobKVKeys {
		return limitResult
	}
	var versions []uint64
	for _, p := range c.Pairs {
		versions = append(versions, m.put(p.Key, p.Value).Version)
	}
	return Result{Versions: versions}
}

// compareAndSet stores the value under a new version when the key is at
// the version expected (0: absent), within the register limits.
func (m *modelJob) compareAndSet(c *KVCompareAndSet) Result {
	l := m.limits.Effective()
	if int64(len(c.Value)) > l.MaxKVValueBytes {
		return limitResult
	}
	cur := m.kv[c.Key]
	if cur.Version != c.Version {
		return Result{Ignored: true, KV: &cur}
	}
	if !cur.Found && len(m.kv) >= l.MaxJobKVKeys {
		return limitResult
	}
	m.kvVersion++
	v := KVValue{Found: true, Value: c.Value, Version: m.kvVersion}
	m.kv[c.Key] = v
	return Result{Swapped: true, KV: &v}
}

// checkDataset checks a dataset of n chunks against the job limits.
func (m *modelJob) checkDataset(p DatasetParams, n int) (Result, bool) {
	l := m.limits.Effective()
	if n > l.MaxJobChunks || (n+p.ChunksPerTask-1)/p.ChunksPerTask > l.MaxJobTasks {
		return limitResult, false
	}
	return Result{}, true
}

// datasetPatterns returns the patterns a SetDataset or DatasetCommit
// carries.
func datasetPatterns(c Command) []string {
	switch c := c.(type) {
	case *SetDataset:
		return c.Patterns
	case *DatasetCommit:
		return c.Patterns
	}
	return nil
}

// datasetParams returns the settings a SetDataset or DatasetCommit
// carries.
func datasetParams(c Command) (DatasetParams, bool) {
	switch c := c.(type) {
	case *SetDataset:
		return c.Params, true
	case *DatasetCommit:
		return c.Params, true
	}
	return DatasetParams{}, false
}

func (m *modelJob) install(p DatasetParams, patterns []string, chunks []Chunk) {
	m.ds = &modelDataset{params: p, patterns: patterns, chunks: chunks}
	m.tasks = make([]modelTask, (len(chunks)+p.ChunksPerTask-1)/p.ChunksPerTask)
	for i := range m.tasks {
		m.tasks[i].queue = "todo"
	}
	m.todo = m.passOrder(0)
}

// passOrder is the order of the task indexes at the start of pass.
func (m *modelJob) passOrder(pass int) []int {
	order := PassOrder(m.ds.params.Seed, m.ds.params.Shuffle, pass, len(m.tasks))
	for k := range order {
		order[k]--
	}
	return order
}

func (m *modelJob) part(c *DatasetPart) Result {
	if m.ds != nil {
		return ignoredResult
	}
	u := m.uploads[c.UploadID]
	staged := 0
	for _, u := range m.uploads {
		staged += len(u.chunks)
	}
	switch {
	case u == nil && (c.Part != 0 || len(m.uploads) >= MaxUploads):
		return invalidResult
	case u != nil && c.Part != u.parts:
		return invalidResult
	case staged+len(c.Chunks) > m.limits.Effective().MaxJobChunks:
		return limitResult
	case u == nil:
		u = &modelUpload{}
		m.uploads[c.UploadID] = u
	}
	u.chunks = append(u.chunks, c.Chunks...)
	u.parts++
	u.touched = m.clock
	return Result{}
}

func (m *modelJob) commit(c *DatasetCommit) Result {
	u := m.uploads[c.UploadID]
	if m.ds != nil {
		delete(m.uploads, c.UploadID)
		return ignoredResult
	}
	if u == nil || u.parts != c.Parts || len(u.chunks) != int(c.NumChunks) || len(u.chunks) == 0 {
		return invalidResult
	}
	if r, ok := m.checkDataset(c.Params, len(u.chunks)); !ok {
		return r
	}
	delete(m.uploads, c.UploadID)
	m.install(c.Params, c.Patterns, u.chunks)
	return Result{}
}

func (m *modelJob) getTask(pass int) Result {
	switch {
	case m.ds == nil:
		return codeResult(ErrNoDataset)
	case pass < m.pass:
		return codeResult(ErrPassBefore)
	case pass > m.pass && len(m.todo) == 0:
		return codeResult(ErrPassAfter)
	case len(m.todo) == 0 && m.count("done") == 0 && len(m.pending) == 0:
		return codeResult(ErrAllTaskFailed)
	case len(m.todo) == 0:
		return codeResult(ErrNoMoreAvailable)
	}
	i := m.todo[0]
	m.todo = m.todo[1:]
	t := &m.tasks[i]
	t.epoch++
	t.deadline = max(m.clock+int64(m.ds.params.TaskTimeout), m.graceTo)
	m.addPending(i)
	cpt := m.ds.params.ChunksPerTask
	chunks := m.ds.chunks[i*cpt : min((i+1)*cpt, len(m.ds.chunks))]
	return Result{Task: &Task{Meta: TaskMeta{ID: i + 1, Epoch: t.epoch}, Chunks: slices.Clone(chunks),
		Pass: m.pass, Lease: time.Duration(t.deadline - m.clock), JobNumber: m.seq}}
}

func (m *modelJob) count(queue string) int {
	n := 0
	for _, t := range m.tasks {
		if t.queue == queue {
			n++
		}
	}
	return n
}

// addPending puts task i after every pending task due no later than it.
func (m *modelJob) addPending(i int) {
	m.tasks[i].queue = "pending"
	at := len(m.pending)
	for at > 0 && m.tasks[m.pending[at-1]].deadline > m.tasks[i].deadline {
		at--
	}
	m.pending = slices.Insert(m.pending, at, i)
}

// unpend removes task i from pending.
func (m *modelJob) unpend(i int) {
	m.pending = slices.DeleteFunc(m.pending, func(j int) bool { return j == i })
}

// lookup returns the task of meta, or the error Result for a bad id.
func (m *modelJob) lookup(meta TaskMeta) (*modelTask, Result, bool) {
	if m.ds == nil {
		return nil, codeResult(ErrNoDataset), false
	}
	if meta.ID < 1 || meta.ID > len(m.tasks) {
		return nil, codeResult(ErrUnknownTask), false
	}
	return &m.tasks[meta.ID-1], Result{}, true
}

func (m *modelJob) finish(meta TaskMeta) Result {
	t, r, ok := m.lookup(meta)
	if !ok {
		return r
	}
	strict := m.ds.params.Strict
	switch {
	case meta.Epoch > t.epoch: // never leased
		return codeResult(ErrStaleEpoch)
	case strict && (t.queue != "pending" || meta.Epoch != t.epoch):
		return codeResult(ErrStaleEpoch)
	case t.queue != "pending":
		return ignoredResult
	case meta.Epoch != 0 && meta.Epoch <= t.passEpoch: // an earlier pass
		return ignoredResult
	}
	m.unpend(meta.ID - 1)
	t.queue, t.failures = "done", 0
	m.nextPass()
	return Result{}
}

func (m *modelJob) fail(meta TaskMeta) Result {
	t, r, ok := m.lookup(meta)
	if !ok {
		return r
	}
	if t.queue != "pending" || meta.Epoch != t.epoch {
		return ignoredResult
	}
	m.failTask(meta.ID - 1)
	m.nextPass()
	return Result{}
}

func (m *modelJob) failTask(i int) {
	m.unpend(i)
	t := &m.tasks[i]
	t.failures++
	if t.failures > m.ds.params.FailureMax {
		t.queue = "failed"
		return
	}
	t.queue = "todo"
	m.todo = append(m.todo, i)
}

func (m *modelJob) renew(meta TaskMeta) Result {
	t, r, ok := m.lookup(meta)
	if !ok {
		return r
	}
	if t.queue != "pending" || meta.Epoch != t.epoch {
		return codeResult(ErrStaleEpoch)
	}
	m.unpend(meta.ID - 1)
	t.deadline = max(m.clock+int64(m.ds.params.TaskTimeout), m.graceTo)
	m.addPending(meta.ID - 1)
	return Result{Lease: time.Duration(t.deadline - m.clock)}
}

func (m *modelJob) nextPass() {
	if len(m.todo) != 0 || len(m.pending) != 0 || m.count("done") == 0 {
		return
	}
	m.pass++
	for i := range m.tasks {
		t := &m.tasks[i]
		t.queue, t.failures, t.passEpoch = "todo", 0, t.epoch
	}
	m.todo = m.passOrder(m.pass)
}

// tick expires what is due in every job, then collects the idle jobs.
func (m *model) tick() Result {
	var r Result
	for _, name := range sortedKeys(m.jobs) {
		j := m.jobs[name]
		j.tick()
		if at, ok := j.collectAt(); ok && at <= m.clock {
			delete(m.jobs, name)
			r.Collected = append(r.Collected, name)
		}
	}
	return r
}

func (m *modelJob) tick() {
	expired := false
	for len(m.pending) > 0 && m.tasks[m.pending[0]].deadline <= m.clock {
		m.failTask(m.pending[0])
		expired = true
	}
	if expired {
		m.nextPass()
	}
	if m.holder != "" && m.saveEnd <= m.clock {
		m.holder, m.saveEnd = "", 0
	}
	for _, id := range sortedKeys(m.groups) {
		g := m.groups[id]
		switch {
		case g.deadline > m.clock:
		case g.status == "open" && g.failOnTimeout && m.protocol >= Protocol2:
			m.retire(id, m.clock+m.retention(g.timeout))
		case g.status == "open" && g.failOnTimeout:
			g.status, g.deadline = "timed_out", m.clock+int64(g.timeout)
		case g.status == "open" && !g.overdue:
			g.overdue, g.deadline = true, m.clock+int64(AbandonedGroupTimeout)
		default:
			delete(m.groups, id)
		}
	}
	for _, id := range sortedKeys(m.timeouts) {
		m.timeouts[id] = slices.DeleteFunc(m.timeouts[id], func(r modelRound) bool { return r.until <= m.clock })
		if len(m.timeouts[id]) == 0 {
			delete(m.timeouts, id)
		}
	}
	for _, id := range sortedKeys(m.uploads) {
		if m.clock-m.uploads[id].touched >= int64(UploadIdleTimeout) {
			delete(m.uploads, id)
		}
	}
}

func (m *model) grace(d time.Duration) {
	limit := m.clock + int64(d)
	m.graceTo = max(m.graceTo, limit)
	for _, j := range m.jobs {
		j.grace(limit)
	}
}

func (m *modelJob) grace(limit int64) {
	for _, i := range m.pending {
		m.tasks[i].deadline = max(m.tasks[i].deadline, limit)
	}
	if m.holder != "" {
		m.saveEnd = max(m.saveEnd, limit)
	}
	for _, g := range m.groups {
		g.deadline = max(g.deadline, limit)
	}
	for _, rounds := range m.timeouts {
		for i := range rounds {
			rounds[i].until = max(rounds[i].until, limit)
		}
	}
	for _, u := range m.uploads {
		u.touched = max(u.touched, limit-int64(UploadIdleTimeout))
	}
}

func (m *modelJob) join(c *Join) Result {
	g := m.groups[c.Group]
	if g != nil && g.status == "timed_out" {
		g = nil
	}
	i := -1
	if g != nil {
		i = slices.IndexFunc(g.members, func(mb modelMember) bool { return mb.id == c.Member })
	}
	switch {
	case g != nil && g.numPeers != c.NumPeers:
		return codeResult(ErrGroupMismatch)
	case g != nil && g.status == "complete" && i < 0:
		return codeResult(ErrGroupMismatch)
	case g == nil && m.groups[c.Group] == nil && len(m.groups) >= m.limits.Effective().MaxJobGroups:
		return limitResult
	case g != nil && g.status == "complete" && m.protocol >= Protocol2:
		// The member's completed join again.
		g.members[i].left = false
		return Result{Generation: g.members[i].gen}
	}
	// The job's group data after the join.
	before := m.groupData()
	data := before
	switch {
	case g == nil:
		if old := m.groups[c.Group]; old != nil {
			for _, mb := range old.members {
				data -= len(mb.data)
			}
		}
		data += len(c.Data)
	case g.status == "complete":
	case i >= 0:
		data += len(c.Data) - len(g.members[i].data)
	default:
		data += len(c.Data)
	}
	if data > before && int64(data) > m.limits.Effective().MaxJobGroupBytes {
		return limitResult
	}
	if old := m.groups[c.Group]; g == nil && old != nil && m.protocol >= Protocol2 {
		m.retire(c.Group, old.deadline)
	}
	if g == nil {
		timeout := c.Timeout
		if timeout == 0 {
			timeout = DefaultTimeout
		}
		g = &modelGroup{numPeers: c.NumPeers, timeout: timeout, deadline: m.clock + int64(timeout), status: "open", failOnTimeout: c.FailOnTimeout}
		m.groups[c.Group] = g
	}
	if g.overdue {
		g.deadline = m.clock + int64(AbandonedGroupTimeout)
	}
	m.nextGen++
	switch {
	case g.status == "complete":
		g.members[i].gen, g.members[i].left = m.nextGen, false
	case i >= 0:
		g.members[i].data, g.members[i].gen = c.Data, m.nextGen
	default:
		g.members = append(g.members, modelMember{id: c.Member, data: c.Data, gen: m.nextGen})
		if len(g.members) == g.numPeers {
			g.status, g.deadline, g.overdue = "complete", m.clock+m.retention(g.timeout), false
		}
	}
	return Result{Generation: m.nextGen}
}

// retention is how long a finished round's outcome is kept.
func (m *model) retention(timeout time.Duration) int64 {
	if m.protocol >= Protocol2 {
		return int64(max(timeout, ResultRetention))
	}
	return int64(timeout)
}

// retire keeps the round of group id, which timed out, until until, and
// forgets the group.
func (m *modelJob) retire(id string, until int64) {
	r := modelRound{lastGen: m.nextGen, until: until, gens: map[uuid.UUID]uint64{}}
	for _, mb := range m.groups[id].members {
		r.gens[mb.id] = mb.gen
	}
	m.timeouts[id] = append(m.timeouts[id], r)
	delete(m.groups, id)
}

// groupData is the member data of every group of the job.
func (m *modelJob) groupData() int {
	n := 0
	for _, g := range m.groups {
		for _, mb := range g.members {
			n += len(mb.data)
		}
	}
	return n
}

func (m *modelJob) leave(c *Leave) Result {
	g := m.groups[c.Group]
	if g == nil {
		return ignoredResult
	}
	i := slices.IndexFunc(g.members, func(mb modelMember) bool { return mb.id == c.Member })
	if i < 0 || g.members[i].left {
		return ignoredResult
	}
	if g.status == "complete" {
		g.members[i].left = true
	} else {
		g.members = slices.Delete(g.members, i, i+1)
	}
	if !slices.ContainsFunc(g.members, func(mb modelMember) bool { return !mb.left }) {
		delete(m.groups, c.Group)
	}
	return Result{}
}

// nextDeadline is what FSM.NextDeadline should answer.
func (m *model) nextDeadline() (int64, bool) {
	var ds []int64
	for _, j := range m.jobs {
		if len(j.pending) > 0 {
			ds = append(ds, j.tasks[j.pending[0]].deadline)
		}
		if j.holder != "" {
			ds = append(ds, j.saveEnd)
		}
		for _, g := range j.groups {
			ds = append(ds, g.deadline)
		}
		for _, rounds := range j.timeouts {
			for _, r := range rounds {
				ds = append(ds, r.until)
			}
		}
		for _, u := range j.uploads {
			ds = append(ds, u.touched+int64(UploadIdleTimeout))
		}
		if d, ok := j.collectAt(); ok {
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return 0, false
	}
	return slices.Min(ds), true
}

// collectAt is when JobTTL collects the job if nothing happens before.
func (m *modelJob) collectAt() (int64, bool) {
	if ttl := m.limits.JobTTL; ttl > 0 && len(m.pending) == 0 && m.holder == "" && len(m.groups) == 0 && len(m.timeouts) == 0 {
		return m.lastActivity + int64(ttl), true
	}
	return 0, false
}

// check compares every query of f with the model.
func (m *model) check(t *rapid.T, f *FSM) {
	var jobs []JobInfo
	for _, name := range sortedKeys(m.jobs) {
		jobs = append(jobs, m.jobs[name].info(name))
	}
	got := f.Jobs()
	for i := range got {
		got[i].Bytes = 0 // the estimate is not modelled
	}
	if !reflect.DeepEqual(got, append([]JobInfo{}, jobs...)) {
		t.Fatalf("jobs %+v, model says %+v", got, jobs)
	}
	if got := f.Limits(); got != m.limits.Effective() {
		t.Fatalf("limits %+v, model says %+v", got, m.limits.Effective())
	}
	for _, name := range propJobs {
		j := m.jobs[jobName(name)]
		if j == nil {
			j = m.newJob() // an unknown job answers as an empty one
		}
		j.check(t, f, name)
	}
	var nodes []Registration
	for _, id := range sortedKeys(m.nodes) {
		nodes = append(nodes, m.nodes[id])
	}
	if got := f.Registrations(); !slices.Equal(got, nodes) {
		t.Fatalf("nodes %v, model says %v", got, nodes)
	}
	gd, gok := f.NextDeadline()
	if md, mok := m.nextDeadline(); gd != md || gok != mok {
		t.Fatalf("NextDeadline %d %v, model says %d %v", gd, gok, md, mok)
	}
}

// info is what FSM.Job should answer of the job, but its size estimate.
func (m *modelJob) info(name string) JobInfo {
	ji := JobInfo{Name: name, Number: m.seq, CreatedAt: m.createdAt, LastActivity: m.lastActivity, HasDataset: m.ds != nil,
		Pass: m.pass, Tasks: len(m.tasks), Todo: len(m.todo), Pending: len(m.pending),
		Done: m.count("done"), Failed: m.count("failed"), Uploads: len(m.uploads), Groups: len(m.groups), KVKeys: len(m.kv)}
	if m.holder != "" && m.saveEnd > m.clock {
		ji.SaveHolder, ji.SaveDeadline = m.holder, m.saveEnd
	}
	ji.CollectAt, _ = m.collectAt()
	return ji
}

// check compares every query of job name with the model's job.
func (m *modelJob) check(t *rapid.T, f *FSM, name string) {
	st := f.Stats(name)
	if st.Job != jobName(name) || st.Clock != m.clock || st.Pass != m.pass || st.HasDataset != (m.ds != nil) || st.Tasks != len(m.tasks) {
		t.Fatalf("job %q: stats %+v, model clock %d pass %d tasks %d", name, st, m.clock, m.pass, len(m.tasks))
	}
	if st.Uploads != len(m.uploads) || st.Groups != len(m.groups) || st.Nodes != len(m.nodes) ||
		st.DedupClients != len(m.clients) || st.Jobs != len(m.jobs) {
		t.Fatalf("job %q: stats %+v, model has %d uploads %d groups %d nodes %d clients %d jobs",
			name, st, len(m.uploads), len(m.groups), len(m.nodes), len(m.clients), len(m.jobs))
	}
	var patterns []string
	if m.ds != nil {
		patterns = m.ds.patterns
	}
	d, _ := f.Dataset(name, 0)
	if !slices.Equal(st.Patterns, patterns) || !slices.Equal(d.Patterns, patterns) {
		t.Fatalf("job %q: patterns %q (stats %q), model says %q", name, d.Patterns, st.Patterns, patterns)
	}
	if f.Pass(name) != m.pass {
		t.Fatalf("job %q: pass %d, model says %d", name, f.Pass(name), m.pass)
	}
	for i, mt := range m.tasks {
		ts, _ := f.Task(name, i+1)
		want := TaskState{Meta: TaskMeta{ID: i + 1, Epoch: mt.epoch}, Queue: mt.queue, Failures: mt.failures}
		if mt.queue == "pending" {
			want.Deadline = mt.deadline
		}
		if ts != want {
			t.Fatalf("job %q: task %+v, model says %+v", name, ts, want)
		}
	}
	if _, err := f.Task(name, len(m.tasks)+1); (m.ds == nil) != errors.Is(err, ErrNoDataset) || err == nil {
		t.Fatalf("job %q: task past the last: %v", name, err)
	}
	holder, end, ok := f.SaveModelHolder(name)
	if live := m.holder != "" && m.saveEnd > m.clock; ok != live || (live && (holder != m.holder || end != m.saveEnd)) {
		t.Fatalf("job %q: save-model holder %q until %d (%v), model says %q until %d", name, holder, end, ok, m.holder, m.saveEnd)
	}
	var groups []GroupInfo
	for _, id := range sortedKeys(m.groups) {
		g := m.groups[id]
		gi := GroupInfo{ID: id, NumPeers: g.numPeers, Status: g.status, Timeout: g.timeout, Deadline: g.deadline,
			FailOnTimeout: g.failOnTimeout, Overdue: g.overdue}
		for _, mb := range g.members {
			gi.Members = append(gi.Members, MemberInfo{ID: mb.id, Generation: mb.gen, DataLen: len(mb.data), Left: mb.left})
		}
		groups = append(groups, gi)
		if got, ok := f.Group(name, id); !ok || !reflect.DeepEqual(got, gi) {
			t.Fatalf("job %q: group %+v, model says %+v", name, got, gi)
		}
	}
	if got := f.Groups(name); !reflect.DeepEqual(got, append([]GroupInfo{}, groups...)) {
		t.Fatalf("job %q: groups %+v, model says %+v", name, got, groups)
	}
	for _, id := range sortedKeys(m.groups) {
		checkIndex(t, f, jobName(name), id)
	}
	m.checkWatches(t, f, name)
	for _, key := range []string{"k0", "k1", "k2"} {
		if got, want := f.KV(name, key), m.kv[key]; got.Found != want.Found || got.Version != want.Version || !bytes.Equal(got.Value, want.Value) {
			t.Fatalf("job %q: key %s is %+v, model says %+v", name, key, got, want)
		}
	}
	keys := []string{"k0", "k1", "k2", "z"}
	for i, got := range f.KVMulti(name, keys) {
		if want := m.kv[keys[i]]; got.Found != want.Found || got.Version != want.Version || !bytes.Equal(got.Value, want.Value) {
			t.Fatalf("job %q: KVMulti gives key %s as %+v, model says %+v", name, keys[i], got, want)
		}
	}
	for _, prefix := range []string{"", "k", "k1"} {
		want := 0
		for key := range m.kv {
			if strings.HasPrefix(key, prefix) {
				want++
			}
		}
		if got := f.KVCount(name, prefix); got != want {
			t.Fatalf("job %q: %d keys under %q, model says %d", name, got, prefix, want)
		}
	}
	for _, id := range []string{"g0", "g1"} {
		if m.groups[id] != nil {
			continue
		}
		if _, ok := f.Group(name, id); ok {
			t.Fatalf("job %q: group %s exists, not in the model", name, id)
		}
	}
}

// checkWatches compares what each member of each group sees with the
// model, under its own generation, older and newer ones, the generations
// of the kept rounds that timed out, and some that are no join of it.
func (m *modelJob) checkWatches(t *rapid.T, f *FSM, job string) {
	for _, id := range []string{"g0", "g1"} {
		gens := []uint64{1, m.nextGen, m.nextGen + 1}
		if g := m.groups[id]; g != nil {
			for _, mb := range g.members {
				gens = append(gens, mb.gen, mb.gen-1, mb.gen+1)
			}
		}
		for _, r := range m.timeouts[id] {
			gens = append(gens, r.lastGen, r.lastGen+1)
			for _, gen := range r.gens {
				gens = append(gens, gen, gen-1)
			}
		}
		slices.Sort(gens)
		gens = slices.Compact(gens)
		var gathered *Gathered // one for every watch of the completion
		for n := byte(1); n <= 3; n++ {
			for _, gen := range gens {
				want := m.watch(id, memberID(n), gen)
				got := f.Watch(job, id, memberID(n), gen)
				if (got.Gathered != nil) != (got.Status == WatchComplete) || (got.Gathered != nil && !slices.EqualFunc(got.Gathered.Data(), got.Data, bytes.Equal)) {
					t.Fatalf("group %s member %d generation %d: watch %+v, gathered data does not go with it", id, n, gen, got)
				}
				if gathered == nil {
					gathered = got.Gathered
				} else if got.Gathered != nil && got.Gathered != gathered {
					t.Fatalf("group %s member %d: the watches of one completion gather its data apart", id, n)
				}
				if got.Status != want.Status || got.Rank != want.Rank || got.Overdue != want.Overdue || !slices.EqualFunc(got.Data, want.Data, bytes.Equal) {
					got.Gathered = nil
					t.Fatalf("group %s member %d generation %d: watch %+v, model says %+v", id, n, gen, got, want)
				}
			}
		}
	}
}

// watch is what the model says the join gen of member to group id sees.
func (m *modelJob) watch(id string, member uuid.UUID, gen uint64) WatchResult {
	if gen > m.nextGen {
		return WatchResult{Status: WatchPending}
	}
	if m.seq == 0 {
		return WatchResult{Status: WatchClosed} // no such job
	}
	for _, r := range m.timeouts[id] {
		if gen > r.lastGen {
			continue
		}
		held, ok := r.gens[member]
		switch {
		case !ok || held < gen:
			return WatchResult{Status: WatchClosed}
		case held > gen:
			return WatchResult{Status: WatchReconnected}
		}
		return WatchResult{Status: WatchTimedOut}
	}
	g := m.groups[id]
	if g == nil {
		return WatchResult{Status: WatchClosed}
	}
	rank := slices.IndexFunc(g.members, func(mb modelMember) bool { return mb.id == member })
	if rank < 0 {
		return WatchResult{Status: WatchClosed}
	}
	mb := g.members[rank]
	switch {
	case mb.left && (g.status != "complete" || m.protocol < Protocol2):
		return WatchResult{Status: WatchClosed}
	case mb.gen > gen:
		return WatchResult{Status: WatchReconnected}
	case mb.gen < gen:
		return WatchResult{Status: WatchClosed}
	case g.status == "timed_out":
		return WatchResult{Status: WatchTimedOut}
	case g.status == "open":
		return WatchResult{Status: WatchPending, Overdue: g.overdue}
	}
	var data [][]byte
	for _, mb := range g.members {
		data = append(data, mb.data)
	}
	return WatchResult{Status: WatchComplete, Data: data, Rank: rank}
}
