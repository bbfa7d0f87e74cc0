package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmaster/raftmaster/internal/bench/etcdmember"
	"github.com/raftmaster/raftmaster/internal/bench/harness"
	"github.com/raftmaster/raftmaster/internal/bench/measure"
	"github.com/raftmaster/raftmaster/internal/procs"
	"github.com/raftmaster/raftmaster/rpc"
)

// FailoverResults is the unavailability after SIGKILL of the leader.
type FailoverResults struct {
	Trainers int `json:"trainers"`
	Tasks    int `json:"tasks"`
	// PollMillis is the period of the survivors' status polls that date
	// the phases.
	PollMillis float64          `json:"poll_ms"`
	Raft       *FailoverBackend `json:"raft,omitempty"`
	Etcd       *FailoverBackend `json:"etcd,omitempty"`
}

// FailoverBackend is every kill of one backend.
type FailoverBackend struct {
	Kills []Kill `json:"kills"`
	// Total is kill → the next acknowledged write of any trainer.
	Total measure.Distribution `json:"total_ms"`
	// NewLeader is kill → a survivor reports a new leader (detection and
	// election; for the etcd backend, session expiry and lock).
	NewLeader measure.Distribution `json:"new_leader_ms"`
	// TakeOver is → that leader reports ready (barrier, registration,
	// grace; for the etcd backend, loading the state).
	TakeOver measure.Distribution `json:"take_over_ms"`
	// Rediscovery is → the next acknowledged write (the clients' retries
	// and backoff).
	Rediscovery measure.Distribution `json:"rediscovery_ms"`
	// EveryTrainer is kill → every trainer has had a write acknowledged,
	// and SlowestRediscovery its part after the new leader reported
	// ready: the slowest client's retries and backoff, which Total, the
	// first write of any trainer, does not show.
	EveryTrainer       measure.Distribution `json:"every_trainer_ms"`
	SlowestRediscovery measure.Distribution `json:"slowest_rediscovery_ms"`
	// Failed counts kills after which no write was acknowledged in time.
	Failed int `json:"failed,omitempty"`
	// Errors counts trainer calls that failed even after the client's
	// retries (none expected).
	Errors int `json:"trainer_errors,omitempty"`
	// TrainerError is the first of those errors.
	TrainerError string `json:"trainer_error,omitempty"`
	Error        string `json:"error,omitempty"`
}

// Kill is one SIGKILL of the leader.
type Kill struct {
	Node      string `json:"node"`
	NewLeader string `json:"new_leader"`
	// ReapMs is kill → the process was reaped.
	ReapMs        float64 `json:"reap_ms"`
	TotalMs       float64 `json:"total_ms"`
	NewLeaderMs   float64 `json:"new_leader_ms"`
	TakeOverMs    float64 `json:"take_over_ms"`
	RediscoveryMs float64 `json:"rediscovery_ms"`
	// EveryTrainerMs is kill → every trainer has had a write
	// acknowledged; SlowestRediscoveryMs is its part after the new
	// leader reported ready.
	EveryTrainerMs       float64 `json:"every_trainer_ms"`
	SlowestRediscoveryMs float64 `json:"slowest_rediscovery_ms"`
	Error                string  `json:"error,omitempty"`
}

// pollPeriod is how often the survivors' status is polled during a
// fail-over.
const pollPeriod = 10 * time.Millisecond

func (s *suite) failover(ctx context.Context, res *Results) error {
	cfg := s.cfg
	out := &FailoverResults{Trainers: cfg.Trainers, Tasks: cfg.DispatchTasks, PollMillis: measure.Millis(pollPeriod)}
	res.Failover = out
	path, err := s.dataset(cfg.DispatchTasks)
	if err != nil {
		return err
	}

	s.logf("fail-over: raft backend, %d kills of the leader under %d trainers", cfg.Kills, cfg.Trainers)
	out.Raft = &FailoverBackend{}
	if c, err := harness.StartRaft(ctx, s.bin, s.dir("failover", "raft"), 3); err != nil {
		out.Raft.Error = firstLine(err.Error())
	} else {
		err := s.killLoop(ctx, c, path, out.Raft)
		c.Stop()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			out.Raft.Error = firstLine(err.Error())
			s.logf("fail-over raft: %v\n%s", err, c.LogTail())
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	s.logf("fail-over: etcd backend, %d kills of the active master under %d trainers", cfg.Kills, cfg.Trainers)
	out.Etcd = &FailoverBackend{}
	etcd, err := etcdmember.Start(ctx, s.exe, s.dir("failover", "etcd"), 3, cfg.EtcdCompaction)
	if err != nil {
		out.Etcd.Error = firstLine(err.Error())
		return nil
	}
	defer etcd.Stop()
	c, err := harness.StartEtcdBackend(ctx, s.bin, s.dir("failover", "masters"), etcd.Endpoints, etcdPrefix, 3, cfg.EtcdTTL)
	if err != nil {
		out.Etcd.Error = firstLine(err.Error())
		return nil
	}
	err = s.killLoop(ctx, c, path, out.Etcd)
	c.Stop()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		out.Etcd.Error = firstLine(err.Error())
		s.logf("fail-over etcd: %v\n%s", err, c.LogTail())
	}
	return nil
}

// killLoop sets the dataset, starts the trainers and kills the leader
// cfg.Kills times, restarting it on its data and waiting for the cluster
// to be whole again after each kill.
func (s *suite) killLoop(ctx context.Context, c *harness.Cluster, dataset string, out *FailoverBackend) error {
	if _, err := c.SetDataset(dataset, 10*time.Minute, 5*time.Minute); err != nil {
		return fmt.Errorf("set dataset: %w", err)
	}
	acks := &ackLog{}
	var errs atomic.Int64
	var errMu sync.Mutex
	tctx, stopTrainers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var trainers harness.Dispatch
	for trainer := range s.cfg.Trainers {
		cl, err := c.NewClient()
		if err != nil {
			stopTrainers()
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for tctx.Err() == nil {
				err := trainers.Pair(tctx, cl, func(_ harness.Op, _, t1 time.Time) { acks.add(trainer, t1) }, nil)
				if err != nil && tctx.Err() == nil {
					if n := errs.Add(1); n <= 5 {
						s.logf("fail-over %s: a trainer's call failed after the client's retries: %v", c.Backend, err)
						errMu.Lock()
						if out.TrainerError == "" {
							out.TrainerError = firstLine(err.Error())
						}
						errMu.Unlock()
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	defer func() {
		stopTrainers()
		wg.Wait()
		out.Errors = int(errs.Load())
	}()

	var total, elected, takeover, rediscovery, every, slowest []float64
	for k := range s.cfg.Kills {
		if err := ctx.Err(); err != nil {
			return err
		}
		kill, err := s.killOnce(ctx, c, acks)
		if err != nil {
			return fmt.Errorf("kill %d: %w", k+1, err)
		}
		out.Kills = append(out.Kills, kill)
		if kill.Error != "" {
			out.Failed++
			s.logf("fail-over %s kill %d/%d of %s: %s", c.Backend, k+1, s.cfg.Kills, kill.Node, kill.Error)
			continue
		}
		total = append(total, kill.TotalMs)
		elected = append(elected, kill.NewLeaderMs)
		takeover = append(takeover, kill.TakeOverMs)
		rediscovery = append(rediscovery, kill.RediscoveryMs)
		every = append(every, kill.EveryTrainerMs)
		slowest = append(slowest, kill.SlowestRediscoveryMs)
		s.logf("fail-over %s kill %2d/%d of %s: next write after %7.0f ms (new leader %s at %6.0f ms, ready +%5.0f ms, write +%5.0f ms; every trainer +%5.0f ms after ready)",
			c.Backend, k+1, s.cfg.Kills, kill.Node, kill.TotalMs, kill.NewLeader, kill.NewLeaderMs, kill.TakeOverMs, kill.RediscoveryMs, kill.SlowestRediscoveryMs)
	}
	out.Total = measure.Distribute(total)
	out.NewLeader = measure.Distribute(elected)
	out.TakeOver = measure.Distribute(takeover)
	out.Rediscovery = measure.Distribute(rediscovery)
	out.EveryTrainer = measure.Distribute(every)
	out.SlowestRediscovery = measure.Distribute(slowest)
	return nil
}

// killOnce waits for a whole cluster with trainers making progress, kills
// its leader, times the phases until the next acknowledged write, and
// restarts the killed node. An error means the cluster could not be
// brought back; a kill without a write in time is reported in Kill.Error.
func (s *suite) killOnce(ctx context.Context, c *harness.Cluster, acks *ackLog) (Kill, error) {
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := c.WaitWhole(wctx); err != nil {
		return Kill{}, err
	}
	// Let the trainers run steadily for a moment.
	since := time.Now()
	for {
		if _, ok := acks.firstAfter(since); ok {
			break
		}
		select {
		case <-wctx.Done():
			return Kill{}, fmt.Errorf("no write acknowledged before the kill: %w", context.Cause(wctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
	time.Sleep(500 * time.Millisecond)
	victim, _, err := c.Leader(wctx)
	if err != nil {
		return Kill{}, err
	}
	var survivors []*procs.Proc
	for _, p := range c.Procs {
		if p != victim && p.Running() {
			survivors = append(survivors, p)
		}
	}

	pctx, stopPolls := context.WithCancel(ctx)
	samples := make([][]statusSample, len(survivors))
	var pwg sync.WaitGroup
	for i, p := range survivors {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			samples[i] = s.pollStatus(pctx, c, p)
		}()
	}
	acks.reset()
	sent, reaped, err := c.Kill(victim)
	if err != nil {
		stopPolls()
		pwg.Wait()
		return Kill{}, err
	}
	kill := Kill{Node: victim.ID, ReapMs: measure.Millis(reaped.Sub(sent))}
	// The etcd backend waits for the session TTL; allow for it.
	deadline := time.Now().Add(2 * time.Minute)
	var acked, everyAcked time.Time
	for {
		if t, ok := acks.firstAfter(reaped); ok && acked.IsZero() {
			acked = t
		}
		if t, ok := acks.everyAfter(reaped, s.cfg.Trainers); ok {
			everyAcked = t
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !acked.IsZero() {
		time.Sleep(100 * time.Millisecond) // the polls of the moments just before
	}
	stopPolls()
	pwg.Wait()
	switch {
	case acked.IsZero():
		kill.Error = "no write acknowledged within 2 minutes"
	case everyAcked.IsZero():
		kill.Error = "a trainer had no write acknowledged within 2 minutes"
	default:
		kill.TotalMs = measure.Millis(acked.Sub(sent))
		ready := phases(&kill, victim, sent, acked, samples)
		kill.EveryTrainerMs = measure.Millis(everyAcked.Sub(sent))
		kill.SlowestRediscoveryMs = measure.Millis(everyAcked.Sub(ready))
	}
	if err := c.Restart(victim); err != nil {
		return kill, err
	}
	return kill, nil
}

// statusSample is one poll of a survivor's status.
type statusSample struct {
	at    time.Time
	node  string
	st    rpc.StatusResponse
	valid bool
}

// pollStatus polls p's stale status every pollPeriod until ctx ends.
func (s *suite) pollStatus(ctx context.Context, c *harness.Cluster, p *procs.Proc) []statusSample {
	var out []statusSample
	tick := time.NewTicker(pollPeriod)
	defer tick.Stop()
	for {
		st, err := c.Status(ctx, p.APIAddr, 300*time.Millisecond)
		out = append(out, statusSample{at: time.Now(), node: p.ID, st: st, valid: err == nil})
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
	}
}

// phases splits a fail-over from the survivors' polls: the first report
// of a leader other than the victim, the first report of that leader that
// it leads and is ready, and the acknowledged write. A phase shorter than
// the poll period can come out as 0. It returns when the new leader
// reported ready, as the phases count it.
func phases(k *Kill, victim *procs.Proc, sent, acked time.Time, samples [][]statusSample) time.Time {
	isVictim := func(ref rpc.NodeRef) bool {
		return ref.ID == "" || ref.ID == victim.ID || ref.ID == victim.APIAddr || ref.APIAddr == victim.APIAddr
	}
	var elected, ready time.Time
	for _, ss := range samples {
		for _, x := range ss {
			if x.valid && x.at.After(sent) && !isVictim(x.st.Leader) && (elected.IsZero() || x.at.Before(elected)) {
				elected, k.NewLeader = x.at, x.st.Leader.ID
			}
		}
	}
	if elected.IsZero() {
		elected = acked
	}
	for _, ss := range samples {
		for _, x := range ss {
			if x.valid && x.node == k.NewLeader && x.st.State == "Leader" && x.st.Ready && x.at.After(sent) && (ready.IsZero() || x.at.Before(ready)) {
				ready = x.at
			}
		}
	}
	if ready.IsZero() || ready.After(acked) {
		ready = acked
	}
	if ready.Before(elected) {
		ready = elected
	}
	if elected.After(acked) {
		elected, ready = acked, acked
	}
	k.NewLeaderMs = measure.Millis(elected.Sub(sent))
	k.TakeOverMs = measure.Millis(ready.Sub(elected))
	k.RediscoveryMs = measure.Millis(acked.Sub(ready))
	return ready
}

// ackLog collects the times of acknowledged writes, by trainer.
type ackLog struct {
	mu   sync.Mutex
	acks []ack
}

// ack is one acknowledged write of a trainer.
type ack struct {
	trainer int
	at      time.Time
}

func (a *ackLog) add(trainer int, t time.Time) {
	a.mu.Lock()
	a.acks = append(a.acks, ack{trainer, t})
	a.mu.Unlock()
}

func (a *ackLog) reset() {
	a.mu.Lock()
	a.acks = a.acks[:0]
	a.mu.Unlock()
}

// firstAfter returns the earliest acknowledgement after t.
func (a *ackLog) firstAfter(t time.Time) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var first time.Time
	for _, x := range a.acks {
		if x.at.After(t) && (first.IsZero() || x.at.Before(first)) {
			first = x.at
		}
	}
	return first, !first.IsZero()
}

// everyAfter returns when the last of trainers 0..n-1 had its first
// acknowledgement after t, and false while one has none.
func (a *ackLog) everyAfter(t time.Time, n int) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	first := make([]time.Time, n)
	for _, x := range a.acks {
		if x.trainer < n && x.at.After(t) && (first[x.trainer].IsZero() || x.at.Before(first[x.trainer])) {
			first[x.trainer] = x.at
		}
	}
	var last time.Time
	for _, f := range first {
		if f.IsZero() {
			return time.Time{}, false
		}
		if f.After(last) {
			last = f
		}
	}
	return last, true
}
