package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/chaos/history"
	"github.com/raftmaster/raftmaster/rpc"
)

// workload drives the cluster as trainers do and records every operation.
type workload struct {
	addrs []string
	rec   *history.Recorder
	seed  uint64
	logf  func(string, ...any)
	// loss loses answers to writes during a LoseAnswers fault.
	loss *answerLoss

	mu      sync.Mutex
	clients []*client.Client
	nextID  int
	// wg counts the goroutines actors start besides their own (the ends
	// of their stalls).
	wg sync.WaitGroup
}

// actor is one sequential client of one job: its own Client (so its own
// request ids), its own random stream, and its own history client index,
// unique across jobs.
type actor struct {
	w   *workload
	id  int
	job string
	cl  *client.Client
	rng *rand.Rand
	// gate stalls the actor's requests (see stall).
	gate *gate
	// nextStall is when a trainer under a session may stall next.
	nextStall time.Time
	// finishAndGet makes a trainer report a finished task on its next
	// GetTask (history.FinishAndGet) rather than by TaskFinished.
	finishAndGet bool
	// batch, above 1, makes a trainer lease that many tasks at a time
	// and report the finished ones with its next GetTask (batchTrainer).
	batch int
}

// newActor returns an actor of job, whose client opens no session. The
// client of the default job names it, as a client of another job does,
// but its calls go to the plain paths (see client.WithJob); the other
// jobs' go to rpc.JobPath.
func (w *workload) newActor(job string) (*actor, error) {
	return w.newSessionActor(job, false)
}

// newSessionActor returns an actor of job whose client leases tasks under
// a session of sessionTTL when sessions is set. Its requests go through
// its gate (see stall), the recorder of what the cluster answers of its
// sessions (sessionWire), and the loss of answers (answerLoss), in that
// order (and, in the chaos_broken_finish build, brokenFinish last).
func (w *workload) newSessionActor(job string, sessions bool) (*actor, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 16
	g := &gate{}
	w.mu.Lock()
	id := w.nextID
	w.nextID++
	w.mu.Unlock()
	var rt http.RoundTripper = sessionWire{base: brokenFinish(t), rec: w.rec, client: id, job: job}
	rt = gatedTransport{base: w.loss.transport(rt), g: g}
	sess := client.WithoutSession()
	if sessions {
		sess = client.WithSessionTTL(sessionTTL)
	}
	cl, err := client.NewClient(client.WithAddrs(w.addrs...), client.WithRetry(15*time.Second), client.WithJob(job),
		client.WithHTTPClient(&http.Client{Transport: rt}), sess)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.clients = append(w.clients, cl)
	a := &actor{w: w, id: id, job: job, cl: cl, rng: rand.New(rand.NewPCG(w.seed, uint64(id)+1)), gate: g}
	return a, nil
}

func (w *workload) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.clients {
		c.Close()
	}
}

// fsmTime returns a wire time as the FSM's unix nanoseconds, which the
// checkers compare; the zero time is 0.
func fsmTime(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// outcome classifies a call's error: a seed error code is a definite
// outcome; anything else (no leader, unknown outcome, giving up, a broken
// connection, a retry the de-duplication table refused) leaves the outcome
// unknown.
func outcome(err error) (code string, appliedAt int64, unknown bool) {
	if err == nil {
		return "", 0, false
	}
	var e *rpc.Error
	if errors.As(err, &e) {
		if c, ok := fsm.ParseCode(e.Code); ok && c != fsm.CodeInvalid && c != fsm.CodeUnknownClient && c != fsm.CodeTooManyClients {
			return e.Code, fsmTime(e.AppliedAt), false
		}
	}
	return "", 0, true
}

// call runs one write and records it; ok fills in the outputs of a
// success from out. The write goes under the actor's session, if its
// client has sessions (client.CallSession).
func (a *actor) call(ctx context.Context, op history.Op, path string, in, out any, ok func(*history.Op)) (history.Op, error) {
	op.Client, op.Job = a.id, a.job
	op.Invoke = a.w.rec.Now()
	session, err := a.cl.CallSession(ctx, path, in, out)
	op.Return = a.w.rec.Now()
	op.Session = session
	code, at, unknown := outcome(err)
	if op.Kind == history.GetTask && code == fsm.CodeStaleEpoch.String() {
		// A retried GetTask whose lease has ended since: it leased a task
		// whose epoch the caller never learns.
		unknown = true
	}
	switch {
	case err == nil:
		ok(&op)
	case unknown:
		op.Return = history.Never
	default:
		op.Code, op.AppliedAt = code, at
		var e *rpc.Error
		if op.Kind == history.FinishAndGet && errors.As(err, &e) {
			// The finish is applied even when the lease is refused.
			op.Finish = finishOutcome(e.Finish)
		}
	}
	a.w.rec.Add(op)
	return op, err
}

// finishOutcome records what an answer says of the finish a GetTask
// carried, nil when it says nothing.
func finishOutcome(f *rpc.FinishOutcome) *history.FinishOutcome {
	if f == nil {
		return nil
	}
	return &history.FinishOutcome{Code: f.Code, Ignored: f.Ignored}
}

// trainer leases tasks pass after pass. It finishes most tasks, reports some
// failed, and abandons a few, as a trainer that dies mid-task, so that
// their leases expire (or, under a session, the leader revokes them). A
// trainer under a session stalls now and then, holding a task (see
// sessionTTL). A trainer with finishAndGet reports a finished task on its
// next GetTask (rpc.GetTaskRequest.Finished), one log entry that finishes
// it and leases the next; it sends the finish again, on the GetTask after,
// when the answer does not say how the finish went (an unknown outcome,
// a refusal before anything was applied).
func (a *actor) trainer(ctx context.Context) {
	if a.batch > 1 {
		a.batchTrainer(ctx)
		return
	}
	pass := 0
	var finished *rpc.TaskMeta // a finish to report on the next GetTask
	for ctx.Err() == nil {
		var resp rpc.GetTaskResponse
		in := history.Op{Kind: history.GetTask, Pass: pass}
		req := rpc.GetTaskRequest{Pass: pass}
		if finished != nil {
			in.Kind, in.Meta, req.Finished = history.FinishAndGet, fsm.TaskMeta(*finished), finished
		}
		op, err := a.call(ctx, in, rpc.PathTaskGet, req, &resp, func(op *history.Op) {
			// A trainer waiting on the next pass may be given a task
			// of the current one: record the pass it belongs to.
			op.Task, op.AppliedAt, op.Pass = fsm.TaskMeta(resp.Task.Meta), fsmTime(resp.AppliedAt), resp.Task.Pass
			op.Holder = resp.Task.Session
			// The files, so that a task of another job's dataset shows.
			for _, c := range resp.Task.Chunks {
				op.Chunks = append(op.Chunks, c.Path)
			}
			if op.Kind == history.FinishAndGet {
				op.Finish = finishOutcome(resp.Finish)
			}
		})
		if op.Finish != nil {
			finished = nil // reported
		}
		switch {
		case err == nil:
		case op.Code == "pass_before":
			pass++
			continue
		case op.Code == "no_more_available" && a.rng.IntN(2) == 0:
			// Move on to the next pass, as the seed's trainers do, and
			// wait there; tasks that come back to this pass find us.
			pass++
			continue
		case op.Code == "pass_after", op.Code == "no_more_available", op.Code == "no_dataset":
			sleep(ctx, time.Duration(20+a.rng.IntN(80))*time.Millisecond)
			continue
		default:
			sleep(ctx, 50*time.Millisecond)
			continue
		}
		if op.Session != 0 && time.Now().After(a.nextStall) {
			if a.nextStall.IsZero() {
				// Not at once: the first stall comes after a first gap.
				a.nextStall = time.Now().Add(randDuration(a.rng, stallGapMin, stallGapMax))
			} else {
				mode := stallPause
				if a.rng.IntN(2) == 0 {
					mode = stallCut
				}
				d := randDuration(a.rng, stallMin, stallMax)
				a.stall(ctx, mode, d)
				a.nextStall = time.Now().Add(d + randDuration(a.rng, stallGapMin, stallGapMax))
			}
		}
		sleep(ctx, time.Duration(a.rng.IntN(40))*time.Millisecond) // "training"
		meta := resp.Task.Meta
		switch r := a.rng.IntN(100); {
		case r < 4:
			// Die mid-task: the lease expires and the task is re-dispatched.
		case r < 14:
			var tr rpc.TaskResponse
			a.call(ctx, history.Op{Kind: history.TaskFailed, Meta: fsm.TaskMeta(meta)}, rpc.PathTaskFailed,
				rpc.TaskRequest{Meta: meta}, &tr, func(op *history.Op) { op.Ignored, op.AppliedAt = tr.Ignored, fsmTime(tr.AppliedAt) })
		case a.finishAndGet:
			finished = &meta
		default:
			var tr rpc.TaskResponse
			a.call(ctx, history.Op{Kind: history.TaskFinished, Meta: fsm.TaskMeta(meta)}, rpc.PathTaskFinished,
				rpc.TaskRequest{Meta: meta}, &tr, func(op *history.Op) { op.Ignored, op.AppliedAt = tr.Ignored, fsmTime(tr.AppliedAt) })
		}
	}
}

// saver asks for the save-model lease of its job now and then. Its name is
// unique across jobs, so that a lease that crossed jobs shows.
func (a *actor) saver(ctx context.Context) {
	trainer := fmt.Sprintf("saver-%d", a.id)
	for ctx.Err() == nil {
		dur := time.Duration(100+a.rng.IntN(400)) * time.Millisecond
		var resp rpc.SaveModelResponse
		a.call(ctx, history.Op{Kind: history.SaveModel, Trainer: trainer, BlockDur: dur}, rpc.PathSaveModel,
			rpc.SaveModelRequest{TrainerID: trainer, BlockDur: rpc.Duration(dur)}, &resp, func(op *history.Op) {
				op.Granted, op.AppliedAt = resp.Granted, fsmTime(resp.AppliedAt)
				if resp.Replayed {
					// A retry's answer says what holds now, not what the
					// first application did: to the model, that is unknown.
					op.Return, op.AppliedAt = history.Never, 0
				}
			})
		sleep(ctx, time.Duration(50+a.rng.IntN(250))*time.Millisecond)
	}
}

// kvKeys are the keys of the register the kv actors share: few, so that
// their writes race. kvCounter is the key they add to, and only add to,
// read and delete (a value a compare-and-set wrote is no integer).
var kvKeys = []string{"k0", "k1", "k2"}

const kvCounter = "n0"

// kv reads and writes the keys of its job's register: compare-and-sets,
// most often, and every write of the register store. A compare-and-set
// expects the version the actor last saw of the key (in a read or a
// write's answer), 0 before it saw one, so it fails when another actor
// wrote the key in between; a compare-value expects the value it last
// saw. Every value it stores is unique in the run: job, actor and a
// sequence number.
func (a *actor) kv(ctx context.Context) {
	seen := map[string]uint64{}
	last := map[string]string{}
	for n := 0; ctx.Err() == nil; n++ {
		key := kvKeys[a.rng.IntN(len(kvKeys))]
		value := fmt.Sprintf("%s/%d/%d", a.job, a.id, n)
		op := history.Op{Client: a.id, Job: a.job, Key: key}
		// saw records what an answer says the key holds.
		saw := func(key string, found bool, value string, version uint64) {
			if !found {
				value, version = "", 0
			}
			seen[key], last[key] = version, value
		}
		var err error
		op.Invoke = a.w.rec.Now()
		switch r := a.rng.IntN(100); {
		case r < 25:
			if a.rng.IntN(4) == 0 {
				key = kvCounter
			}
			op.Kind, op.Key = history.KVGet, key
			var v client.KVValue
			if v, err = a.cl.KVGet(ctx, key); err == nil {
				op.Found, op.Read, op.Version = v.Found, string(v.Value), v.Version
				saw(key, v.Found, op.Read, v.Version)
			}
		case r < 55:
			op.Kind, op.Expect, op.Value = history.KVCAS, seen[key], value
			var res client.KVResult
			if res, err = a.cl.KVCompareAndSet(ctx, key, op.Expect, []byte(value)); err == nil {
				op.Swapped, op.Found, op.Read, op.Version = res.Swapped, res.Found, string(res.Value), res.Version
				saw(key, res.Found, op.Read, res.Version)
			}
		case r < 63:
			op.Kind, op.ExpectValue, op.Value = history.KVCompareValue, last[key], value
			var res client.KVResult
			if res, err = a.cl.KVCompareValue(ctx, key, []byte(op.ExpectValue), []byte(value)); err == nil {
				op.Swapped, op.Found, op.Read, op.Version = res.Swapped, res.Found, string(res.Value), res.Version
				saw(key, res.Found, op.Read, res.Version)
			}
		case r < 70:
			if a.rng.IntN(3) == 0 {
				key = kvCounter
			}
			op.Kind, op.Key = history.KVDelete, key
			if a.rng.IntN(2) == 0 {
				op.Expect = seen[key]
			}
			var res client.KVDeleteResult
			if res, err = a.cl.KVDelete(ctx, key, op.Expect); err == nil {
				op.Found, op.Version = res.Found, res.Version
				if res.Deleted {
					op.Number = 1
					saw(key, false, "", 0)
				}
			}
		case r < 72:
			prefix := key
			if a.rng.IntN(4) == 0 {
				prefix = "k" // every key but the counter
			}
			op.Kind, op.Key = history.KVDeletePrefix, prefix
			var deleted int
			if deleted, err = a.cl.KVDeletePrefix(ctx, prefix); err == nil {
				op.Number = int64(deleted)
				for _, k := range kvKeys {
					if strings.HasPrefix(k, prefix) {
						saw(k, false, "", 0)
					}
				}
			}
		case r < 80:
			other := kvKeys[(slices.Index(kvKeys, key)+1+a.rng.IntN(len(kvKeys)-1))%len(kvKeys)]
			op.Kind, op.Key = history.KVMultiSet, ""
			op.Keys, op.Values = []string{key, other}, []string{value + "/a", value + "/b"}
			pairs := []client.KVPair{{Key: key, Value: []byte(op.Values[0])}, {Key: other, Value: []byte(op.Values[1])}}
			if op.Versions, err = a.cl.KVMultiSet(ctx, pairs); err == nil && len(op.Versions) == len(pairs) {
				for i, k := range op.Keys {
					saw(k, true, op.Values[i], op.Versions[i])
				}
			}
		case r < 88:
			// Call, for the version the typed call does not return.
			op.Kind, op.Value = history.KVAppend, fmt.Sprintf("+%d.%d", a.id, n)
			var resp rpc.KVAppendResponse
			if err = a.cl.Call(ctx, rpc.PathKVAppend, rpc.KVAppendRequest{Key: key, Value: []byte(op.Value)}, &resp); err == nil {
				op.Number, op.Version = int64(resp.Length), resp.Version
				seen[key] = resp.Version
			}
		default:
			op.Kind, op.Key, op.Amount = history.KVAdd, kvCounter, int64(a.rng.IntN(9)-3)
			var resp rpc.KVAddResponse
			if err = a.cl.Call(ctx, rpc.PathKVAdd, rpc.KVAddRequest{Key: kvCounter, Amount: op.Amount}, &resp); err == nil {
				op.Number, op.Version = resp.Value, resp.Version
				saw(kvCounter, true, strconv.FormatInt(resp.Value, 10), resp.Version)
			}
		}
		op.Return = a.w.rec.Now()
		code, _, unknown := outcome(err)
		switch {
		case err == nil:
		case unknown:
			// Only the inputs stay: the answer's fields say nothing.
			op = history.Op{Client: op.Client, Job: op.Job, Kind: op.Kind, Invoke: op.Invoke, Return: history.Never, Key: op.Key,
				Expect: op.Expect, ExpectValue: op.ExpectValue, Value: op.Value, Amount: op.Amount, Keys: op.Keys, Values: op.Values}
		default:
			op.Code = code
		}
		a.w.rec.Add(op)
		sleep(ctx, time.Duration(10+a.rng.IntN(90))*time.Millisecond)
	}
}

// gatherer runs allgather rounds of three members of job: groups complete,
// a member sometimes re-joins before completion (its first join sees
// ErrReconnected), and members sometimes leave afterwards. Group ids
// depend on seq and the round only, so the gatherers of two jobs with the
// same seq use the same group ids, each in its own job: groups that
// crossed jobs would show.
func (w *workload) gatherer(ctx context.Context, job string, seq int) {
	const peers = 3
	var members []*actor
	for range peers {
		a, err := w.newActor(job)
		if err != nil {
			w.logf("allgather actor: %v", err)
			return
		}
		members = append(members, a)
	}
	stream := 1000 + uint64(seq)
	if job != rpc.DefaultJob {
		// Its own choices, and the default job's stay as they were.
		stream += 1 << 32
	}
	rng := rand.New(rand.NewPCG(w.seed, stream))
	for round := 0; ctx.Err() == nil; round++ {
		group := fmt.Sprintf("g%d-%d", seq, round)
		rejoin := rng.IntN(5) == 0
		leave := rng.IntN(4) == 0
		var wg sync.WaitGroup
		for i, a := range members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a.member(ctx, group, peers, i == 0 && rejoin, leave)
			}()
		}
		wg.Wait()
		sleep(ctx, time.Duration(rng.IntN(200))*time.Millisecond)
	}
}

// member joins group (twice when rejoin is set) and records the results.
func (a *actor) member(ctx context.Context, group string, peers int, rejoin, leave bool) {
	id := uuid.New()
	joins := 1
	if rejoin {
		joins = 2
	}
	var watchers []client.Watcher
	for j := range joins {
		data := fmt.Sprintf("%s/%s/%d/%d", a.job, group, a.id, j)
		op := history.Op{Client: a.id, Job: a.job, Kind: history.Join, Group: group, Member: id, NumPeers: peers, Data: data, Invoke: a.w.rec.Now()}
		w, err := a.cl.JoinWithDeadline(group, id, peers, data, nil, nil, 30*time.Second)
		op.Return = a.w.rec.Now()
		if err != nil {
			code, _, unknown := outcome(err)
			if unknown {
				op.Return = history.Never
			}
			op.Code = code
			a.w.rec.Add(op)
			return
		}
		a.w.rec.Add(op)
		watchers = append(watchers, w)
	}
	for _, w := range watchers {
		op := history.Op{Client: a.id, Job: a.job, Kind: history.Watch, Group: group, Member: id, NumPeers: peers, Invoke: a.w.rec.Now()}
		select {
		case res := <-w.C:
			op.Return = a.w.rec.Now()
			switch {
			case res.Err == nil:
				for _, raw := range res.Raw {
					var s string
					if err := json.Unmarshal(raw, &s); err != nil {
						s = string(raw)
					}
					op.Result = append(op.Result, s)
				}
				op.Rank = res.Rank
			default:
				code, _, unknown := outcome(res.Err)
				if c := sentinelCode(res.Err); c != "" {
					code, unknown = c, false
				}
				if unknown {
					op.Return = history.Never
				}
				op.Code = code
			}
		case <-ctx.Done():
			op.Return = history.Never
		}
		a.w.rec.Add(op)
	}
	if leave && ctx.Err() == nil {
		op := history.Op{Client: a.id, Job: a.job, Kind: history.Leave, Group: group, Member: id, Invoke: a.w.rec.Now()}
		err := a.cl.Leave(group, id)
		op.Return = a.w.rec.Now()
		if err != nil {
			op.Return = history.Never
		}
		a.w.rec.Add(op)
	}
}

// sentinelCode maps the allgather sentinels a watcher delivers to codes.
func sentinelCode(err error) string {
	switch {
	case errors.Is(err, client.ErrReconnected):
		return fsm.CodeReconnected.String()
	case errors.Is(err, client.ErrClosed):
		return fsm.CodeClosed.String()
	case errors.Is(err, client.ErrAllGatherTimeoutExceeded):
		return fsm.CodeAllGatherTimeout.String()
	}
	return ""
}

// randDuration draws a duration in [lo, hi).
func randDuration(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
