package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/bench/harness"
	"github.com/raftmaster/raftmaster/internal/bench/measure"
	"github.com/raftmaster/raftmaster/internal/procs"
	"github.com/raftmaster/raftmaster/rpc"
)

// SessionsResults is what sessions change for a trainer that dies holding
// a task, and what trainers that only hold their tasks cost the log.
type SessionsResults struct {
	// Tasks is the dataset of the dead-trainer runs: in every pass the
	// trainer killed holds one task, and the waiting trainer finishes the
	// others, then waits for that one.
	Tasks int `json:"tasks"`
	// PollMillis is how often the waiting trainer asks for a task while
	// the pass has none left to lease.
	PollMillis float64 `json:"poll_ms"`
	// LeaderKillDelayMillis is the trainer's SIGKILL → the leader's, in
	// the run that kills both.
	LeaderKillDelayMillis float64 `json:"leader_kill_delay_ms"`
	// Session kills trainers that hold their task under a session (the
	// Go client's default).
	Session *DeadTrainer `json:"session,omitempty"`
	// Leader kills them too, then the leader inside the TTL.
	Leader *DeadTrainer `json:"session_leader,omitempty"`
	// NoSession kills trainers made WithoutSession, whose task comes back
	// when its lease runs out: the behaviour before sessions.
	NoSession *DeadTrainer  `json:"no_session,omitempty"`
	Idle      *IdleTrainers `json:"idle,omitempty"`
	Error     string        `json:"error,omitempty"`
}

// DeadTrainer is every SIGKILL of a trainer holding a task, in one run.
type DeadTrainer struct {
	Job string `json:"job"`
	// Session is whether the trainers had sessions; KillsLeader whether
	// the leader was killed too, LeaderKillDelayMillis after each trainer.
	Session     bool `json:"session"`
	KillsLeader bool `json:"kills_leader,omitempty"`
	// TTLMillis is the sessions' TTL as the leader listed it.
	TTLMillis float64 `json:"ttl_ms,omitempty"`
	// TaskTimeoutMillis is the job's task timeout (the lease of a task
	// leased without a session).
	TaskTimeoutMillis float64       `json:"task_timeout_ms"`
	Kills             []TrainerKill `json:"kills"`
	// Returned is the trainer's SIGKILL → its task leased to the waiting
	// trainer.
	Returned measure.Distribution `json:"returned_ms"`
	// Election is the leader's SIGKILL → a survivor leads and is ready.
	Election measure.Distribution `json:"election_ms,omitzero"`
	// Bound is, per kill, 2×TTL + that kill's election; Within counts
	// the kills whose task came back within it.
	Bound  measure.Distribution `json:"bound_ms,omitzero"`
	Within int                  `json:"within_bound,omitempty"`
	// Passes counts the passes checked, ExactlyOnce those in which every
	// task was finished exactly once; Violation describes the first that
	// was not.
	Passes      int    `json:"passes"`
	ExactlyOnce int    `json:"exactly_once"`
	Violation   string `json:"violation,omitempty"`
	// Failed counts kills after which the task did not come back in
	// time.
	Failed int    `json:"failed,omitempty"`
	Error  string `json:"error,omitempty"`
}

// TrainerKill is one SIGKILL of a trainer holding a task.
type TrainerKill struct {
	Pass    int    `json:"pass"`
	Task    int    `json:"task"`
	Session uint64 `json:"session,omitempty"`
	// HeldMs is the task's lease → the SIGKILL.
	HeldMs float64 `json:"held_ms"`
	// ReturnedMs is the SIGKILL → the task leased to the waiting trainer.
	ReturnedMs float64 `json:"returned_ms"`
	// Leader is the leader killed, NewLeader the one after it, and
	// ElectionMs the leader's SIGKILL → NewLeader leads and is ready.
	Leader     string  `json:"leader,omitempty"`
	NewLeader  string  `json:"new_leader,omitempty"`
	ElectionMs float64 `json:"election_ms,omitempty"`
	// BoundMs is 2×TTL + ElectionMs.
	BoundMs float64 `json:"bound_ms,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// IdleTrainers is the Raft log and the keep-alives of trainers that hold a
// task each under their session and write nothing.
type IdleTrainers struct {
	Trainers    int     `json:"trainers"`
	HoldSeconds float64 `json:"hold_seconds"`
	// TaskTimeoutMillis is the job's task timeout, longer than the hold:
	// the leader revokes a held task whose reader reports no progress for
	// that long, and these trainers read nothing.
	TaskTimeoutMillis float64 `json:"task_timeout_ms"`
	TTLMillis         float64 `json:"ttl_ms"`
	// Sessions is how many sessions the leader listed during the hold.
	Sessions int `json:"sessions"`
	// IndexBefore, IndexLeased and IndexAfter are the leader's applied
	// index before the trainers started, once every one had its task,
	// and at the end of the hold.
	IndexBefore uint64 `json:"index_before"`
	IndexLeased uint64 `json:"index_leased"`
	IndexAfter  uint64 `json:"index_after"`
	// Opened and Leased are the writes that opened the trainers' sessions
	// and leased their tasks, counted by their clients.
	Opened int `json:"opened"`
	Leased int `json:"leased"`
	// IdleWrites is IndexAfter − IndexBefore − Opened − Leased: the log
	// entries made while the trainers only kept their sessions alive.
	IdleWrites int64 `json:"idle_writes"`
	// KeepAlives are the keep-alives the leader answered 200 during the
	// hold, from its metrics, and KeepAlivesPerSec their rate;
	// ClientKeepAlives is the same counted by the clients.
	KeepAlives          int     `json:"keep_alives"`
	KeepAlivesPerSec    float64 `json:"keep_alives_per_sec"`
	ClientKeepAlives    int     `json:"client_keep_alives"`
	ClientKeepAlivesSec float64 `json:"client_keep_alives_per_sec"`
	// Grew lists the leader's counters of commands and of the session
	// tracker's work that grew during the hold, by how much: what the
	// entries while idle were, if any.
	Grew map[string]float64 `json:"grew,omitempty"`
	// LeaderChanged says the leader or its term changed during the hold.
	LeaderChanged bool   `json:"leader_changed,omitempty"`
	Error         string `json:"error,omitempty"`
}

const (
	// deadTrainerTasks is the dataset of the dead-trainer runs.
	deadTrainerTasks = 4
	// taskPoll is how often the waiting trainer asks for a task.
	taskPoll = 20 * time.Millisecond
	// leaderKillDelay is the trainer's SIGKILL → the leader's.
	leaderKillDelay = time.Second
)

// deadRun is one run of trainer kills.
type deadRun struct {
	job         string
	session     bool
	killsLeader bool
	kills       int
	taskTimeout time.Duration // 0: the server's default
}

func (s *suite) sessions(ctx context.Context, res *Results) error {
	cfg := s.cfg
	out := &SessionsResults{Tasks: deadTrainerTasks, PollMillis: measure.Millis(taskPoll), LeaderKillDelayMillis: measure.Millis(leaderKillDelay)}
	res.Sessions = out
	path, err := s.dataset(deadTrainerTasks)
	if err != nil {
		return err
	}
	c, err := harness.StartRaft(ctx, s.bin, s.dir("sessions", "dead"), 3)
	if err != nil {
		return err
	}
	if err := waitSessionLevel(ctx, c); err != nil {
		c.Stop()
		return err
	}
	runs := []struct {
		dst **DeadTrainer
		run deadRun
	}{
		{&out.Session, deadRun{job: "dead-trainer", session: true, kills: cfg.SessionKills}},
		{&out.Leader, deadRun{job: "dead-trainer-and-leader", session: true, killsLeader: true, kills: cfg.SessionKills}},
		{&out.NoSession, deadRun{job: "dead-trainer-no-session", kills: cfg.BaselineKills, taskTimeout: cfg.BaselineTaskTimeout}},
	}
	for _, r := range runs {
		if r.run.kills == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			c.Stop()
			return err
		}
		*r.dst = s.deadTrainers(ctx, c, path, r.run)
	}
	c.Stop()
	if err := ctx.Err(); err != nil {
		return err
	}
	out.Idle = s.idleTrainers(ctx)
	return ctx.Err()
}

// deadTrainers sets the dataset of run's job and kills run.kills trainers,
// one per pass, each holding a task that another trainer waits for.
func (s *suite) deadTrainers(ctx context.Context, c *harness.Cluster, dataset string, run deadRun) *DeadTrainer {
	out := &DeadTrainer{Job: run.job, Session: run.session, KillsLeader: run.killsLeader}
	what := "trainer SIGKILLs, session"
	switch {
	case run.killsLeader:
		what = fmt.Sprintf("trainer SIGKILLs, session, leader SIGKILL %s later", leaderKillDelay)
	case !run.session:
		what = "trainer SIGKILLs, no session"
	}
	s.logf("sessions: %d %s (job %s)", run.kills, what, run.job)
	fail := func(err error) *DeadTrainer {
		out.Error = firstLine(err.Error())
		s.logf("sessions %s: %v\n%s", run.job, err, c.LogTail())
		return out
	}
	opts := []client.Option{client.WithAddrs(c.APIs()...), client.WithRetry(time.Minute), client.WithJob(run.job)}
	if !run.session {
		opts = append(opts, client.WithoutSession())
	}
	waiter, err := client.NewClient(opts...)
	if err != nil {
		return fail(err)
	}
	defer waiter.Close()
	if _, err := waiter.SetDatasetWithParams([]string{dataset}, client.DatasetParams{ChunksPerTask: 1, TaskTimeout: run.taskTimeout}); err != nil {
		return fail(fmt.Errorf("set dataset: %w", err))
	}
	job, err := s.leaderJob(ctx, c, run.job, func(rpc.Job) bool { return true })
	if err != nil {
		return fail(err)
	}
	if job.Params != nil {
		out.TaskTimeoutMillis = measure.Millis(time.Duration(job.Params.TaskTimeout))
	}
	finished := map[int]map[int]int{} // pass → task → TaskFinished acknowledged
	var returned, elections, bounds []float64
	for k := range run.kills {
		if err := ctx.Err(); err != nil {
			out.Error = "interrupted"
			break
		}
		kill, err := s.deadTrainerOnce(ctx, c, waiter, run, k, finished, out)
		if err != nil {
			return fail(fmt.Errorf("kill %d: %w", k+1, err))
		}
		out.Kills = append(out.Kills, kill)
		if kill.Error != "" {
			out.Failed++
			s.logf("sessions %s kill %d/%d: %s", run.job, k+1, run.kills, kill.Error)
			continue
		}
		returned = append(returned, kill.ReturnedMs)
		line := fmt.Sprintf("sessions %s kill %2d/%d: task %d back after %6.0f ms (held %5.0f ms)", run.job, k+1, run.kills, kill.Task, kill.ReturnedMs, kill.HeldMs)
		if run.killsLeader {
			elections = append(elections, kill.ElectionMs)
			bounds = append(bounds, kill.BoundMs)
			if kill.ReturnedMs <= kill.BoundMs {
				out.Within++
			}
			line += fmt.Sprintf("; leader %s killed, %s ready after %5.0f ms; 2×TTL + election %6.0f ms", kill.Leader, kill.NewLeader, kill.ElectionMs, kill.BoundMs)
		}
		s.logf("%s", line)
	}
	out.Returned = measure.Distribute(returned)
	out.Election = measure.Distribute(elections)
	out.Bound = measure.Distribute(bounds)
	return out
}

// deadTrainerOnce runs pass k of run: a trainer process leases a task and
// holds it, the waiting trainer finishes the rest of the pass, the holder
// is killed at a random moment of its keep-alive (or renewal) period, and
// the waiting trainer asks for a task until it gets the one held, and
// finishes it. An error means the run cannot go on; a task that did not
// come back is reported in TrainerKill.Error.
func (s *suite) deadTrainerOnce(ctx context.Context, c *harness.Cluster, waiter *client.Client, run deadRun, k int,
	finished map[int]map[int]int, out *DeadTrainer) (TrainerKill, error) {
	kill := TrainerKill{Pass: k}
	timeout := time.Duration(out.TaskTimeoutMillis * float64(time.Millisecond))
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute+timeout)
	defer cancel()
	if err := c.WaitWhole(wctx); err != nil {
		return kill, err
	}
	h, err := s.startHolder(wctx, c, run, k)
	if err != nil {
		return kill, err
	}
	defer h.stop()
	kill.Task, kill.Session = h.task.Meta.ID, h.task.Session
	period := time.Duration(h.task.LeaseMs*float64(time.Millisecond)) / 3
	if run.session {
		if h.task.Session == 0 {
			return kill, errors.New("the trainer's task is not held by a session: is the cluster at protocol level 6?")
		}
		ttl, err := s.heldBySession(wctx, c, h.task)
		if err != nil {
			return kill, err
		}
		out.TTLMillis = measure.Millis(ttl)
		period = ttl / 3
	} else if h.task.Session != 0 {
		return kill, fmt.Errorf("a trainer made WithoutSession holds task %d under session %d", h.task.Meta.ID, h.task.Session)
	}
	if finished[k] == nil {
		finished[k] = map[int]int{}
	}
	if err := drainPass(wctx, waiter, k, finished); err != nil {
		return kill, fmt.Errorf("finishing pass %d: %w", k, err)
	}
	// The kill falls anywhere in the holder's keep-alive (or renewal)
	// period.
	if period > 0 && !sleepCtx(wctx, rand.N(period)) {
		return kill, context.Cause(wctx)
	}
	var victim *procs.Proc
	stopPolls := func() [][]statusSample { return nil }
	if run.killsLeader {
		if victim, _, err = c.Leader(wctx); err != nil {
			return kill, err
		}
		stopPolls = s.pollSurvivors(ctx, c, victim)
		defer stopPolls()
		kill.Leader = victim.ID
	}

	sent, err := h.kill()
	if err != nil {
		return kill, err
	}
	kill.HeldMs = measure.Millis(sent.Sub(h.leased))
	wait := 2 * time.Minute
	if !run.session {
		wait += timeout
	}
	type leased struct {
		task client.Task
		at   time.Time
		err  error
	}
	got := make(chan leased, 1)
	go func() {
		t, at, err := awaitTask(wctx, waiter, k, sent.Add(wait))
		got <- leased{t, at, err}
	}()
	var leaderSent time.Time
	if run.killsLeader {
		if !sleepCtx(wctx, time.Until(sent.Add(leaderKillDelay))) {
			return kill, context.Cause(wctx)
		}
		if leaderSent, _, err = c.Kill(victim); err != nil {
			return kill, err
		}
	}
	r := <-got
	if run.killsLeader {
		if r.err == nil {
			sleepCtx(ctx, 100*time.Millisecond) // the polls of the moments just before
		}
		kill.NewLeader, kill.ElectionMs = election(stopPolls(), victim, leaderSent, r.at)
		kill.BoundMs = 2*out.TTLMillis + kill.ElectionMs
		if err := c.Restart(victim); err != nil {
			return kill, err
		}
	}
	if r.err != nil {
		kill.Error = firstLine(r.err.Error())
		return kill, nil
	}
	kill.ReturnedMs = measure.Millis(r.at.Sub(sent))
	if r.task.Meta.ID != h.task.Meta.ID || r.task.Pass != k {
		kill.Error = fmt.Sprintf("the waiting trainer got task %d of pass %d, not the task %d of pass %d killed with its trainer",
			r.task.Meta.ID, r.task.Pass, h.task.Meta.ID, k)
		return kill, nil
	}
	if err := waiter.TaskFinishedContext(wctx, r.task.Meta); err != nil {
		return kill, fmt.Errorf("TaskFinished(%d): %w", r.task.Meta.ID, err)
	}
	finished[k][r.task.Meta.ID]++
	s.checkPass(wctx, c, run.job, k, finished[k], out)
	return kill, nil
}

// checkPass checks pass k of job: its every task finished exactly once,
// and the cluster on to the next pass with no task set aside as failed.
func (s *suite) checkPass(ctx context.Context, c *harness.Cluster, job string, k int, fin map[int]int, out *DeadTrainer) {
	out.Passes++
	var bad []string
	for id := 1; id <= deadTrainerTasks; id++ {
		if n := fin[id]; n != 1 {
			bad = append(bad, fmt.Sprintf("task %d finished %d times", id, n))
		}
	}
	for id := range fin {
		if id < 1 || id > deadTrainerTasks {
			bad = append(bad, fmt.Sprintf("unknown task %d finished", id))
		}
	}
	st, err := s.leaderJob(ctx, c, job, func(j rpc.Job) bool { return j.Pass > k })
	switch {
	case err != nil:
		bad = append(bad, fmt.Sprintf("the cluster did not move on from pass %d: %v", k, err))
	case st.Failed > 0:
		bad = append(bad, fmt.Sprintf("%d tasks set aside as failed", st.Failed))
	}
	if len(bad) == 0 {
		out.ExactlyOnce++
		return
	}
	slices.Sort(bad)
	msg := fmt.Sprintf("pass %d: %s", k, strings.Join(bad, ", "))
	s.logf("sessions %s: %s", job, msg)
	if out.Violation == "" {
		out.Violation = msg
	}
}

// drainPass leases and finishes every task of pass k that is left to
// lease, recording each finish, until the pass has none left.
func drainPass(ctx context.Context, cl *client.Client, k int, finished map[int]map[int]int) error {
	for {
		t, err := cl.GetTaskContext(ctx, k)
		switch {
		case errors.Is(err, client.ErrNoMoreAvailable):
			return nil
		case err != nil:
			return fmt.Errorf("GetTask(%d): %w", k, err)
		}
		if err := cl.TaskFinishedContext(ctx, t.Meta); err != nil {
			return fmt.Errorf("TaskFinished(%d): %w", t.Meta.ID, err)
		}
		if finished[t.Pass] == nil {
			finished[t.Pass] = map[int]int{}
		}
		finished[t.Pass][t.Meta.ID]++
	}
}

// awaitTask asks for a task of pass k every taskPoll until it gets one,
// and returns it with the time its GetTask was answered; it gives up at
// deadline. Calls that fail after the client's retries (a fail-over) are
// asked again.
func awaitTask(ctx context.Context, cl *client.Client, k int, deadline time.Time) (client.Task, time.Time, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var last error
	for {
		t, err := cl.GetTaskContext(ctx, k)
		at := time.Now()
		switch {
		case err == nil:
			return t, at, nil
		case errors.Is(err, client.ErrPassBefore):
			return t, at, fmt.Errorf("pass %d ended without the task held by the trainer killed", k)
		case !errors.Is(err, client.ErrNoMoreAvailable):
			last = err
		}
		if !sleepCtx(ctx, taskPoll) {
			if last != nil {
				return t, at, fmt.Errorf("the task did not come back within %s (last error: %v)", time.Until(deadline).Round(time.Second), last)
			}
			return t, at, fmt.Errorf("the task did not come back in time")
		}
	}
}

// pollSurvivors polls the status of every running node but victim, until
// the function it returns is first called; that function returns the
// samples.
func (s *suite) pollSurvivors(ctx context.Context, c *harness.Cluster, victim *procs.Proc) func() [][]statusSample {
	pctx, cancel := context.WithCancel(ctx)
	var survivors []*procs.Proc
	for _, p := range c.Procs {
		if p != victim && p.Running() {
			survivors = append(survivors, p)
		}
	}
	samples := make([][]statusSample, len(survivors))
	var wg sync.WaitGroup
	for i, p := range survivors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			samples[i] = s.pollStatus(pctx, c, p)
		}()
	}
	var once sync.Once
	return func() [][]statusSample {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
		return samples
	}
}

// election finds, in the survivors' polls, the first one after sent at
// which a node other than victim reported that it leads and is ready,
// and returns that node and sent → then; until when no poll shows one.
func election(samples [][]statusSample, victim *procs.Proc, sent, until time.Time) (string, float64) {
	var first time.Time
	node := ""
	for _, ss := range samples {
		for _, x := range ss {
			if x.valid && x.node != victim.ID && x.at.After(sent) && x.st.State == "Leader" && x.st.Ready &&
				(first.IsZero() || x.at.Before(first)) {
				first, node = x.at, x.node
			}
		}
	}
	if first.IsZero() {
		first = until
	}
	return node, measure.Millis(first.Sub(sent))
}

// waitSessionLevel waits up to a minute until every node of a new cluster
// has applied the protocol level of sessions and is registered with its
// release: its leader raises the level once every node has registered,
// a client that finds the cluster below it writes without a session for
// a while, and each node registers its release again once the level has
// risen.
func waitSessionLevel(ctx context.Context, c *harness.Cluster) error {
	return waitProtocol(ctx, c, rpc.SessionProtocol, "sessions")
}

// waitProtocol is waitSessionLevel for protocol level, which what needs.
func waitProtocol(ctx context.Context, c *harness.Cluster, level uint64, what string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		why := ""
		for _, p := range c.Procs {
			st, err := c.Status(ctx, p.APIAddr, time.Second)
			switch {
			case err != nil:
				why = fmt.Sprintf("%s: %v", p.ID, err)
			case st.ClusterProtocol < level:
				why = fmt.Sprintf("the cluster is at protocol level %d, below %s' %d", st.ClusterProtocol, what, level)
			case !st.Registered:
				why = p.ID + " is not registered with its release"
			}
			if why != "" {
				break
			}
		}
		if why == "" {
			return nil
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return errors.New(why)
		}
	}
}

// quietIndex waits until the leader's applied index has not moved for a
// second, for up to 30 seconds, and returns the leader and its status.
func quietIndex(ctx context.Context, c *harness.Cluster) (*procs.Proc, rpc.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	leader, st, err := c.Leader(ctx)
	for err == nil {
		if !sleepCtx(ctx, time.Second) {
			return leader, st, fmt.Errorf("the leader's applied index kept moving (at %d): %w", st.AppliedIndex, context.Cause(ctx))
		}
		var again rpc.StatusResponse
		var p *procs.Proc
		if p, again, err = c.Leader(ctx); err == nil && p == leader && again.AppliedIndex == st.AppliedIndex {
			return leader, again, nil
		}
		leader, st = p, again
	}
	return leader, st, err
}

// leaderJob asks the leader about job until ok accepts the answer, for up
// to 30 seconds.
func (s *suite) leaderJob(ctx context.Context, c *harness.Cluster, job string, ok func(rpc.Job) bool) (rpc.Job, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	hc := &http.Client{}
	var last error
	for {
		var j rpc.Job
		leader, _, err := c.Leader(ctx)
		if err == nil {
			var body []byte
			body, err = harness.GetBody(ctx, hc, "http://"+leader.APIAddr+rpc.JobRoute(rpc.PathJob, url.PathEscape(job)))
			if err == nil {
				err = json.Unmarshal(body, &j)
			}
		}
		if err == nil && ok(j) {
			return j, nil
		}
		if err != nil {
			last = err
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			if last == nil {
				last = fmt.Errorf("job %s: pass %d, %d todo, %d pending", job, j.Pass, j.Todo, j.Pending)
			}
			return j, last
		}
	}
}

// heldBySession waits until the leader lists the held task under its
// session, and returns the session's TTL.
func (s *suite) heldBySession(ctx context.Context, c *harness.Cluster, t heldTask) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	for {
		list, err := s.listSessions(ctx, c)
		if err == nil {
			last = fmt.Errorf("the leader does not list task %d under session %d", t.Meta.ID, t.Session)
			for _, ss := range list.Sessions {
				if ss.Session != t.Session {
					continue
				}
				for _, st := range ss.Tasks {
					if st.Meta.ID == t.Meta.ID {
						return time.Duration(ss.TTL), nil
					}
				}
			}
		} else {
			last = err
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return 0, last
		}
	}
}

// listSessions is the leader's GET /v1/sessions.
func (s *suite) listSessions(ctx context.Context, c *harness.Cluster) (rpc.SessionsResponse, error) {
	var list rpc.SessionsResponse
	leader, _, err := c.Leader(ctx)
	if err != nil {
		return list, err
	}
	body, err := harness.GetBody(ctx, &http.Client{}, "http://"+leader.APIAddr+rpc.PathSessions)
	if err != nil {
		return list, fmt.Errorf("GET %s: %w", rpc.PathSessions, err)
	}
	return list, json.Unmarshal(body, &list)
}

// holder is a trainer process holding a task (trainerMode).
type holder struct {
	cmd    *exec.Cmd
	done   chan struct{}
	task   heldTask
	leased time.Time // when it said it had leased the task
	log    string
}

// startHolder starts a trainer process that leases a task of pass k of
// run's job and holds it, and waits until it has.
func (s *suite) startHolder(ctx context.Context, c *harness.Cluster, run deadRun, k int) (*holder, error) {
	args := []string{trainerMode, "--addrs", strings.Join(c.APIs(), ","), "--job", run.job, "--pass", strconv.Itoa(k)}
	if !run.session {
		args = append(args, "--no-session")
	}
	h := &holder{cmd: exec.Command(s.exe, args...), done: make(chan struct{}),
		log: filepath.Join(s.dir("sessions", "trainers"), fmt.Sprintf("%s-%d.log", run.job, k))}
	logf, err := os.Create(h.log)
	if err != nil {
		return nil, err
	}
	h.cmd.Stderr = logf
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := h.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	lines := make(chan []byte, 1)
	go func() {
		defer close(h.done)
		defer logf.Close()
		line, _ := bufio.NewReader(stdout).ReadBytes('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
		_ = h.cmd.Wait()
	}()
	select {
	case line := <-lines:
		if err := json.Unmarshal(line, &h.task); err != nil {
			h.stop()
			tail, _ := os.ReadFile(h.log)
			return nil, fmt.Errorf("the trainer leased no task (%s): %s", h.cmd.ProcessState, strings.TrimSpace(string(tail)))
		}
		h.leased = time.Now()
		return h, nil
	case <-ctx.Done():
		h.stop()
		return nil, fmt.Errorf("the trainer leased no task: %w", context.Cause(ctx))
	}
}

// kill sends the holder SIGKILL and waits until it is reaped; it returns
// when the signal was sent.
func (h *holder) kill() (time.Time, error) {
	sent := time.Now()
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return sent, err
	}
	select {
	case <-h.done:
		return sent, nil
	case <-time.After(30 * time.Second):
		return sent, errors.New("the trainer did not die")
	}
}

// stop kills the holder if it still runs.
func (h *holder) stop() {
	select {
	case <-h.done:
	default:
		_ = h.cmd.Process.Kill()
		<-h.done
	}
}

// idleTrainers starts a cluster, has cfg.IdleTrainers trainers lease a task
// each under their session and hold it for cfg.IdleHold, and measures the
// log's growth and the keep-alives the leader served meanwhile.
func (s *suite) idleTrainers(ctx context.Context) *IdleTrainers {
	n, hold := s.cfg.IdleTrainers, s.cfg.IdleHold
	out := &IdleTrainers{Trainers: n, HoldSeconds: hold.Seconds(), TaskTimeoutMillis: measure.Millis(hold + time.Minute)}
	s.logf("sessions: %d idle trainers, each holding a task for %s", n, hold)
	fail := func(c *harness.Cluster, err error) *IdleTrainers {
		out.Error = firstLine(err.Error())
		if c != nil {
			s.logf("sessions idle: %v\n%s", err, c.LogTail())
		} else {
			s.logf("sessions idle: %v", err)
		}
		return out
	}
	path, err := s.dataset(n)
	if err != nil {
		return fail(nil, err)
	}
	c, err := harness.StartRaft(ctx, s.bin, s.dir("sessions", "idle"), 3)
	if err != nil {
		return fail(nil, err)
	}
	defer c.Stop()
	if err := waitSessionLevel(ctx, c); err != nil {
		return fail(c, err)
	}
	if _, err := c.SetDataset(path, hold+time.Minute, 5*time.Minute); err != nil {
		return fail(c, fmt.Errorf("set dataset: %w", err))
	}
	leader, st0, err := quietIndex(ctx, c)
	if err != nil {
		return fail(c, err)
	}
	out.IndexBefore = st0.AppliedIndex

	counts := &requestCounter{}
	clients := make([]*client.Client, n)
	defer func() {
		var wg sync.WaitGroup
		for _, cl := range clients {
			if cl != nil {
				wg.Add(1)
				go func() { defer wg.Done(); cl.Close() }()
			}
		}
		wg.Wait()
	}()
	for i := range clients {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		cl, err := client.NewClient(client.WithAddrs(c.APIs()...), client.WithRetry(time.Minute),
			client.WithHTTPClient(&http.Client{Transport: counts.wrap(t)}))
		if err != nil {
			return fail(c, err)
		}
		clients[i] = cl
	}
	// Lease, 16 trainers at a time.
	var next atomic.Int64
	errs := make([]error, 16)
	var wg sync.WaitGroup
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				t, err := clients[i].GetTaskContext(ctx, 0)
				if err == nil && t.Session == 0 {
					err = errors.New("the task is not held by a session: is the cluster at protocol level 6?")
				}
				if err != nil {
					errs[w] = fmt.Errorf("trainer %d: GetTask: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(c, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(c, err)
	}
	_, st1, err := c.Leader(ctx)
	if err != nil {
		return fail(c, err)
	}
	m1, err := leaderMetrics(ctx, leader.APIAddr)
	if err != nil {
		return fail(c, err)
	}
	out.IndexLeased = st1.AppliedIndex
	opened, leased, cka1 := counts.snapshot()
	out.Opened, out.Leased = opened, leased
	t1 := time.Now()

	// Hold, and look at the leader's sessions half-way.
	if !sleepCtx(ctx, hold/2) {
		return fail(c, context.Cause(ctx))
	}
	if list, err := s.listSessions(ctx, c); err == nil {
		out.Sessions = len(list.Sessions)
		if len(list.Sessions) > 0 {
			out.TTLMillis = measure.Millis(time.Duration(list.Sessions[0].TTL))
		}
	} else {
		s.logf("sessions idle: %v", err)
	}
	if !sleepCtx(ctx, hold-hold/2) {
		return fail(c, context.Cause(ctx))
	}
	leader2, st2, err := c.Leader(ctx)
	if err != nil {
		return fail(c, err)
	}
	m2, err := leaderMetrics(ctx, leader.APIAddr)
	if err != nil {
		return fail(c, err)
	}
	ka1, ka2 := m1.keepAlives(), m2.keepAlives()
	out.Grew = m2.grew(m1)
	_, _, cka2 := counts.snapshot()
	held := time.Since(t1)
	out.IndexAfter = st2.AppliedIndex
	out.LeaderChanged = leader2 != leader || st2.Term != st1.Term || st1.Term != st0.Term
	out.IdleWrites = int64(out.IndexAfter) - int64(out.IndexBefore) - int64(out.Opened) - int64(out.Leased)
	out.KeepAlives = int(ka2 - ka1)
	out.KeepAlivesPerSec = (ka2 - ka1) / held.Seconds()
	out.ClientKeepAlives = cka2 - cka1
	out.ClientKeepAlivesSec = float64(cka2-cka1) / held.Seconds()
	s.logf("sessions idle: %d trainers, %d sessions listed; applied index %d → %d (leased) → %d (after %s); %d opens + %d leases; %d entries while idle; %.1f keep-alives/s served by the leader (%.1f/s sent)",
		n, out.Sessions, out.IndexBefore, out.IndexLeased, out.IndexAfter, held.Round(time.Second), out.Opened, out.Leased,
		out.IdleWrites, out.KeepAlivesPerSec, out.ClientKeepAlivesSec)
	if len(out.Grew) > 0 {
		s.logf("sessions idle: the leader's counters that grew during the hold: %v", out.Grew)
	}
	if out.LeaderChanged {
		s.logf("sessions idle: the leader changed during the hold")
	}
	return out
}

// requestCounter counts the trainers' requests that were answered 200:
// session openings, task leases and keep-alives.
type requestCounter struct {
	opened, leased, keepAlives atomic.Int64
}

func (rc *requestCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return countingTransport{rc: rc, next: next}
}

func (rc *requestCounter) snapshot() (opened, leased, keepAlives int) {
	return int(rc.opened.Load()), int(rc.leased.Load()), int(rc.keepAlives.Load())
}

type countingTransport struct {
	rc   *requestCounter
	next http.RoundTripper
}

// RoundTrip counts the request once it is answered 200.
func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || req.Method != http.MethodPost {
		return resp, err
	}
	switch p := req.URL.Path; {
	case p == rpc.PathSessions:
		t.rc.opened.Add(1)
	case strings.HasSuffix(p, "/keepalive"):
		t.rc.keepAlives.Add(1)
	case strings.HasSuffix(p, rpc.PathTaskGet[len("/v1"):]):
		t.rc.leased.Add(1)
	}
	return resp, err
}

// metricSamples are the samples of a node's metrics, by series
// ("name{labels}").
type metricSamples map[string]float64

// leaderMetrics reads the metrics of the node at addr.
func leaderMetrics(ctx context.Context, addr string) (metricSamples, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body, err := harness.GetBody(ctx, &http.Client{}, "http://"+addr+"/metrics")
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	out := metricSamples{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, nil
}

// keepAlives is the count of keep-alives answered 200
// (raftmaster_http_request_duration_seconds, by route and code).
func (m metricSamples) keepAlives() float64 {
	var n float64
	for k, v := range m {
		if strings.HasPrefix(k, "raftmaster_http_request_duration_seconds_count{") && strings.Contains(k, "keepalive") && strings.Contains(k, `code="200"`) {
			n += v
		}
	}
	return n
}

// grew returns the counters of commands and of the session tracker's work
// that are higher in m than in before.
func (m metricSamples) grew(before metricSamples) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if !strings.HasPrefix(k, "raftmaster_commands_total") && !strings.HasPrefix(k, "raftmaster_session") {
			continue
		}
		if !strings.Contains(k, "_total") {
			continue
		}
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// sleepCtx waits for d or until ctx is done; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
