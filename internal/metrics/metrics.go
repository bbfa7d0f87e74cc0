// Package metrics exports a replica's metrics in Prometheus format at
// /metrics: hashicorp/raft's own (through a go-metrics Prometheus sink),
// the replica's view of leadership and the time its proposals and applies
// take, the state of every job, read from the local state machine at each
// scrape, and the API's requests, redirects and command outcomes.
//
// Series of a job carry the label JobLabel, not "job": Prometheus gives
// every target a job label of its own (the scrape job), and would rename a
// scraped one to exported_job.
package metrics

import (
	"errors"
	"strconv"
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/raftmaster/raftmaster/fsm"
)

// JobLabel is the label that names a training job in the series of jobs.
const JobLabel = "raftmaster_job"

// Config says where a replica's metrics come from.
type Config struct {
	// FSM returns the replica's state machine, which may change (a restore
	// replaces it), or nil before there is one.
	FSM func() *fsm.FSM
	// Leadership, when set, returns the replica's view of its cluster's
	// leadership, read at each scrape.
	Leadership func() Leadership
}

// Leadership is a replica's view of its cluster's leadership.
type Leadership struct {
	// HasLeader is true while the replica knows a leader, IsLeader while
	// it is the leader.
	HasLeader, IsLeader bool
	// Raft, set on the Raft backend, adds what only Raft has.
	Raft *RaftView
}

// RaftView is what a Raft node knows of its cluster besides the leader.
type RaftView struct {
	// Term is the node's current term.
	Term uint64
	// LeaderChanges counts the changes of leader the node has seen since
	// it started.
	LeaderChanges uint64
	// Voter is true while the node is a voter of its latest configuration;
	// Voters counts the voters of that configuration.
	Voter  bool
	Voters int
}

// Metrics is a replica's registry and the collectors the API and the Raft
// node feed. It implements httpapi.Observer and raftnode.Recorder.
type Metrics struct {
	// Registry holds every metric of the replica; serve it with promhttp.
	Registry *prometheus.Registry

	requests  *prometheus.HistogramVec
	redirects prometheus.Counter
	commands  *prometheus.CounterVec
	dedupHits prometheus.Counter
	// What the leader's session tracker did (sessions.Observer).
	sessionsExpired, sessionTasksRevoked, sessionCheckpoints prometheus.Counter
	commit                                                   prometheus.Histogram
	fsmApply                                                 prometheus.Histogram
	f                                                        func() *fsm.FSM

	// jobsMu guards jobs, the jobs that have series in commands.
	jobsMu sync.Mutex
	jobs   map[string]struct{}
}

// raftSink is the one go-metrics sink of the process: hashicorp/raft
// reports to go-metrics' global registry, through go-metrics' compat
// package, which picks the same implementation raft was built with.
var (
	raftSinkOnce sync.Once
	raftSink     *gmprom.PrometheusSink
	raftSinkErr  error
)

// New returns the metrics of a replica.
func New(cfg Config) (*Metrics, error) {
	if cfg.FSM == nil {
		return nil, errors.New("metrics: no state machine")
	}
	f := cfg.FSM
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg, f: f, jobs: make(map[string]struct{}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "raftmaster_http_request_duration_seconds",
			Help: "API requests by route and status code. The route is the pattern the request matched " +
				"(\"POST /v1/jobs/{job}/task/get\"; the bare path when its method is not allowed; \"/\" for none), never the path sent.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route", "code"}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "raftmaster_commit_duration_seconds",
			Help: "Commands this replica proposed as leader, by the time from the proposal to its result: " +
				"appended, acknowledged by a quorum, committed and applied.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		fsmApply: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "raftmaster_fsm_apply_duration_seconds",
			Help:    "Committed log entries this replica applied, by the time the state machine took to apply one.",
			Buckets: []float64{.000005, .00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
		redirects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raftmaster_http_redirects_total",
			Help: "Requests answered 307 to the leader.",
		}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raftmaster_commands_total",
			Help: "State machine commands proposed through the API, by job, command and outcome code " +
				"(granted save-model leases have outcome granted).",
		}, []string{JobLabel, "command", "outcome"}),
		dedupHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raftmaster_dedup_hits_total",
			Help: "Retried writes answered with their first outcome.",
		}),
		sessionsExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raftmaster_sessions_expired_total",
			Help: "Sessions this replica, as leader, ended because their keep-alives stopped for their TTL.",
		}),
		sessionTasksRevoked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raftmaster_session_tasks_revoked_total",
			Help: "Tasks held by sessions that this replica, as leader, revoked because their reader reported no progress for the job's task timeout.",
		}),
		sessionCheckpoints: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raftmaster_session_checkpoints_total",
			Help: "Sessions this replica, as leader, checkpointed: the first keep-alive of a session in a leader's term writes one log entry for it.",
		}),
	}
	raftSinkOnce.Do(func() {
		raftSink, raftSinkErr = gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Expiration: time.Hour, Registerer: prometheus.NewRegistry()})
		if raftSinkErr == nil {
			cfg := gometrics.DefaultConfig("raftmaster")
			cfg.EnableHostname = false
			cfg.EnableRuntimeMetrics = false
			_, raftSinkErr = gometrics.NewGlobal(cfg, raftSink)
		}
	})
	if raftSinkErr != nil {
		return nil, raftSinkErr
	}
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.redirects, commandsCollector{m}, m.dedupHits, m.commit, m.fsmApply,
		m.sessionsExpired, m.sessionTasksRevoked, m.sessionCheckpoints,
		raftSink, &stateCollector{f: f}, leadershipCollector{cfg.Leadership},
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Request records an API request: its route pattern, status and duration.
func (m *Metrics) Request(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Observe(d.Seconds())
}

// Committed records the time from a proposal of this replica, as leader,
// to its result.
func (m *Metrics) Committed(d time.Duration) { m.commit.Observe(d.Seconds()) }

// FSMApplied records the time the state machine took to apply an entry.
func (m *Metrics) FSMApplied(d time.Duration) { m.fsmApply.Observe(d.Seconds()) }

// SessionsExpired counts sessions the leader ended for missing their
// keep-alives (sessions.Observer).
func (m *Metrics) SessionsExpired(n int) { m.sessionsExpired.Add(float64(n)) }

// SessionTasksRevoked counts held tasks the leader revoked for lack of
// progress (sessions.Observer).
func (m *Metrics) SessionTasksRevoked(n int) { m.sessionTasksRevoked.Add(float64(n)) }

// SessionsCheckpointed counts sessions the leader checkpointed
// (sessions.Observer).
func (m *Metrics) SessionsCheckpointed(n int) { m.sessionCheckpoints.Add(float64(n)) }

// Redirect records a 307 to the leader.
func (m *Metrics) Redirect() { m.redirects.Inc() }

// Applied records the outcome of a command the API proposed. Only a job
// that exists once the command applied gets series: a command to an
// unknown job adds none, so that requests naming jobs at will cannot grow
// the metrics without bound.
func (m *Metrics) Applied(c fsm.Command, r *fsm.Result) {
	if r.Duplicate {
		m.dedupHits.Inc()
	}
	job := c.Hdr().Job
	if job == "" {
		job = fsm.DefaultJob
	}
	if !m.jobExists(job) {
		return
	}
	outcome := r.Code.String()
	if r.Granted {
		outcome = "granted"
	}
	m.jobsMu.Lock()
	m.jobs[job] = struct{}{}
	m.commands.WithLabelValues(job, c.Type().String(), outcome).Inc()
	m.jobsMu.Unlock()
}

// jobExists reports whether job is in the local state.
func (m *Metrics) jobExists(job string) bool {
	f := m.f()
	if f == nil {
		return false
	}
	_, ok := f.Job(job)
	return ok
}

// pruneJobs drops the series of jobs that are no longer in the state:
// deleted, or expired.
func (m *Metrics) pruneJobs() {
	m.jobsMu.Lock()
	defer m.jobsMu.Unlock()
	for job := range m.jobs {
		if !m.jobExists(job) {
			m.commands.DeletePartialMatch(prometheus.Labels{JobLabel: job})
			delete(m.jobs, job)
		}
	}
}

// commandsCollector serves the command counters of the jobs that exist.
type commandsCollector struct{ m *Metrics }

// Describe sends the counters' descriptor.
func (c commandsCollector) Describe(ch chan<- *prometheus.Desc) { c.m.commands.Describe(ch) }

// Collect drops the series of jobs that are gone, then sends the rest.
func (c commandsCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.pruneJobs()
	c.m.commands.Collect(ch)
}

// stateCollector reads every job's state from the local state machine at
// each scrape.
type stateCollector struct{ f func() *fsm.FSM }

var (
	descTasks    = prometheus.NewDesc("raftmaster_job_tasks", "Tasks of a job's current pass, by state: todo, pending (leased), done and failed (set aside after too many failures).", []string{JobLabel, "state"}, nil)
	descPass     = prometheus.NewDesc("raftmaster_job_pass", "A job's current pass.", []string{JobLabel}, nil)
	descGroups   = prometheus.NewDesc("raftmaster_job_allgather_groups", "A job's allgather groups.", []string{JobLabel}, nil)
	descMembers  = prometheus.NewDesc("raftmaster_job_allgather_members", "Members of a job's allgather groups.", []string{JobLabel}, nil)
	descSave     = prometheus.NewDesc("raftmaster_job_save_lease_held", "1 while a trainer holds the job's save-model lease.", []string{JobLabel}, nil)
	descBytes    = prometheus.NewDesc("raftmaster_job_state_bytes", "A job's share of the state's size estimate.", []string{JobLabel}, nil)
	descExpired  = prometheus.NewDesc("raftmaster_job_leases_expired_total", "Task leases of a job that ran out (the trainer neither finished nor renewed), counted by this replica since it started.", []string{JobLabel}, nil)
	descJobs     = prometheus.NewDesc("raftmaster_jobs", "Jobs in the state.", nil, nil)
	descState    = prometheus.NewDesc("raftmaster_state_bytes", "The state's size estimate, which --max-state-bytes bounds.", nil, nil)
	descApplied  = prometheus.NewDesc("raftmaster_applied_index", "The last log index applied to the local state.", nil, nil)
	descSessions = prometheus.NewDesc("raftmaster_sessions", "Sessions open in the state.", nil, nil)

	// The series of each source of a mixture job (a dataset set with
	// sources).
	descSourceRecords = prometheus.NewDesc("raftmaster_source_records_total",
		"Records of a mixture source's finished tasks, in every pass, each task finish counted once: exact, the same on every replica.",
		[]string{JobLabel, "source"}, nil)
	descSourceFinished = prometheus.NewDesc("raftmaster_source_tasks_finished_total",
		"Tasks of a mixture source finished, in every pass, each finish counted once.", []string{JobLabel, "source"}, nil)
	descSourceWeight = prometheus.NewDesc("raftmaster_source_weight",
		"A mixture source's weight now (relative to the other sources' of its job; 0 while it is not read).", []string{JobLabel, "source"}, nil)
	descSourcePass = prometheus.NewDesc("raftmaster_source_pass",
		"A mixture source's own pass: each source cycles through its tasks at its own pace, and the job's pass is the least of them.",
		[]string{JobLabel, "source"}, nil)
)

// Describe sends the descriptors.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTasks, descPass, descGroups, descMembers, descSave, descBytes, descExpired, descJobs, descState, descApplied, descSessions,
		descSourceRecords, descSourceFinished, descSourceWeight, descSourcePass} {
		ch <- d
	}
}

// Collect reads the state.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.f()
	if f == nil {
		return
	}
	jobs := f.Jobs()
	for _, j := range jobs {
		for _, t := range []struct {
			state string
			n     int
		}{{"todo", j.Todo}, {"pending", j.Pending}, {"done", j.Done}, {"failed", j.Failed}} {
			ch <- prometheus.MustNewConstMetric(descTasks, prometheus.GaugeValue, float64(t.n), j.Name, t.state)
		}
		ch <- prometheus.MustNewConstMetric(descPass, prometheus.GaugeValue, float64(j.Pass), j.Name)
		ch <- prometheus.MustNewConstMetric(descGroups, prometheus.GaugeValue, float64(j.Groups), j.Name)
		members := 0
		for _, g := range f.Groups(j.Name) {
			members += len(g.Members)
		}
		ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(members), j.Name)
		held := 0.0
		if j.SaveHolder != "" {
			held = 1
		}
		ch <- prometheus.MustNewConstMetric(descSave, prometheus.GaugeValue, held, j.Name)
		ch <- prometheus.MustNewConstMetric(descBytes, prometheus.GaugeValue, float64(j.Bytes), j.Name)
		ch <- prometheus.MustNewConstMetric(descExpired, prometheus.CounterValue, float64(f.LeasesExpired(j.Name)), j.Name)
		if j.HasDataset {
			collectSources(ch, j.Name, f.Stats(j.Name).Sources)
		}
	}
	ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(len(jobs)))
	ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, float64(f.Stats(fsm.DefaultJob).StateBytes))
	ch <- prometheus.MustNewConstMetric(descApplied, prometheus.GaugeValue, float64(f.AppliedIndex()))
	ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(len(f.Sessions())))
}

// collectSources sends the series of the sources of a mixture job; none
// for a dataset of one source.
func collectSources(ch chan<- prometheus.Metric, job string, sources []fsm.SourceStats) {
	for _, src := range sources {
		ch <- prometheus.MustNewConstMetric(descSourceRecords, prometheus.CounterValue, float64(src.Records), job, src.Name)
		ch <- prometheus.MustNewConstMetric(descSourceFinished, prometheus.CounterValue, float64(src.Finished), job, src.Name)
		ch <- prometheus.MustNewConstMetric(descSourceWeight, prometheus.GaugeValue, float64(src.Weight)/fsm.WeightUnit, job, src.Name)
		ch <- prometheus.MustNewConstMetric(descSourcePass, prometheus.GaugeValue, float64(src.Pass), job, src.Name)
	}
}

// leadershipCollector reads the replica's view of leadership at each
// scrape.
type leadershipCollector struct{ view func() Leadership }

var (
	descHasLeader = prometheus.NewDesc("raftmaster_has_leader", "1 while this replica knows a leader of its cluster, else 0.", nil, nil)
	descIsLeader  = prometheus.NewDesc("raftmaster_is_leader", "1 while this replica is the leader (the active master on the etcd backend), else 0.", nil, nil)
	descTerm      = prometheus.NewDesc("raftmaster_term", "This replica's current Raft term.", nil, nil)
	descChanges   = prometheus.NewDesc("raftmaster_leader_changes_total", "Changes of leader this replica has seen since it started: a leader elected, or learnt of after a time without one.", nil, nil)
	descVoter     = prometheus.NewDesc("raftmaster_is_voter", "1 while this replica is a voter of its latest Raft configuration, else 0.", nil, nil)
	descVoters    = prometheus.NewDesc("raftmaster_voters", "Voters of this replica's latest Raft configuration.", nil, nil)
)

// Describe sends the descriptors.
func (c leadershipCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHasLeader, descIsLeader, descTerm, descChanges, descVoter, descVoters} {
		ch <- d
	}
}

// Collect reads the view.
func (c leadershipCollector) Collect(ch chan<- prometheus.Metric) {
	if c.view == nil {
		return
	}
	v := c.view()
	ch <- prometheus.MustNewConstMetric(descHasLeader, prometheus.GaugeValue, bit(v.HasLeader))
	ch <- prometheus.MustNewConstMetric(descIsLeader, prometheus.GaugeValue, bit(v.IsLeader))
	if r := v.Raft; r != nil {
		ch <- prometheus.MustNewConstMetric(descTerm, prometheus.GaugeValue, float64(r.Term))
		ch <- prometheus.MustNewConstMetric(descChanges, prometheus.CounterValue, float64(r.LeaderChanges))
		ch <- prometheus.MustNewConstMetric(descVoter, prometheus.GaugeValue, bit(r.Voter))
		ch <- prometheus.MustNewConstMetric(descVoters, prometheus.GaugeValue, float64(r.Voters))
	}
}

// bit is 1 for true and 0 for false.
func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
