package metrics

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/raftmaster/raftmaster/fsm"
)

// ownMetrics are the families this package defines (raft's own, through
// go-metrics, are named by hashicorp/raft).
var ownMetrics = []string{
	"raftmaster_http_request_duration_seconds", "raftmaster_http_redirects_total", "raftmaster_commands_total",
	"raftmaster_dedup_hits_total", "raftmaster_commit_duration_seconds", "raftmaster_fsm_apply_duration_seconds",
	"raftmaster_job_tasks", "raftmaster_job_pass", "raftmaster_job_allgather_groups", "raftmaster_job_allgather_members",
	"raftmaster_job_save_lease_held", "raftmaster_job_state_bytes", "raftmaster_job_leases_expired_total",
	"raftmaster_jobs", "raftmaster_state_bytes", "raftmaster_applied_index",
	"raftmaster_has_leader", "raftmaster_is_leader", "raftmaster_term", "raftmaster_leader_changes_total",
	"raftmaster_is_voter", "raftmaster_voters",
	"raftmaster_sessions", "raftmaster_sessions_expired_total", "raftmaster_session_tasks_revoked_total", "raftmaster_session_checkpoints_total",
	"raftmaster_source_records_total", "raftmaster_source_tasks_finished_total", "raftmaster_source_weight", "raftmaster_source_pass",
}

// newFSM returns a state machine with job "train": a dataset of 4 tasks,
// one leased and one finished.
func newFSM(t *testing.T) *fsm.FSM {
	t.Helper()
	f := fsm.New()
	var index uint64
	apply := func(c fsm.Command) *fsm.Result {
		t.Helper()
		index++
		c.Hdr().Now = int64(index) * int64(time.Millisecond)
		c.Hdr().Job = "train"
		r := f.ApplyEntry(index, fsm.Encode(c))
		if r.Code != fsm.CodeOK {
			t.Fatalf("%T: %v", c, r.Code)
		}
		return r
	}
	var chunks []fsm.Chunk
	for i := range 4 {
		chunks = append(chunks, fsm.Chunk{Path: "p", Offset: int64(i), Records: 1})
	}
	apply(&fsm.SetDataset{Params: fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Hour, FailureMax: 3}, Chunks: chunks})
	apply(&fsm.GetTask{})
	r := apply(&fsm.GetTask{})
	apply(&fsm.TaskFinished{Meta: r.Task.Meta})
	return f
}

// scrape gathers m's registry, writes it in the text format and parses it
// back, as Prometheus would.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range families {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	out, err := parser.TextToMetricFamilies(&buf)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, buf.String())
	}
	return out
}

// value returns the value of the one series of family name with the label
// pairs given (name=value), a histogram's count.
func value(t *testing.T, families map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	for _, m := range families[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			match = match && have[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

func TestNewNeedsAStateMachine(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without a state machine: no error")
	}
}

// TestRaftReplica: a Raft replica's metrics parse as Prometheus' text
// format, pass its naming lint, and carry the leadership view, the
// latencies recorded and every job's tasks by state under raftmaster_job.
func TestRaftReplica(t *testing.T) {
	f := newFSM(t)
	view := Leadership{HasLeader: true, IsLeader: true, Raft: &RaftView{Term: 7, LeaderChanges: 2, Voter: true, Voters: 3}}
	m, err := New(Config{FSM: func() *fsm.FSM { return f }, Leadership: func() Leadership { return view }})
	if err != nil {
		t.Fatal(err)
	}
	m.Committed(3 * time.Millisecond)
	m.Committed(4 * time.Millisecond)
	m.FSMApplied(20 * time.Microsecond)
	m.Request("POST /v1/jobs/{job}/task/get", 200, time.Millisecond)
	m.Applied(&fsm.GetTask{Header: fsm.Header{Job: "train"}}, &fsm.Result{Code: fsm.CodeOK})
	m.SessionsExpired(2)
	m.SessionTasksRevoked(1)
	m.SessionsCheckpointed(3)

	problems, err := testutil.GatherAndLint(m.Registry, ownMetrics...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	got := scrape(t, m)
	for name, mf := range got {
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "job" {
					t.Errorf("%s has a job label, which Prometheus renames to exported_job", name)
				}
			}
		}
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"raftmaster_has_leader", nil, 1},
		{"raftmaster_is_leader", nil, 1},
		{"raftmaster_term", nil, 7},
		{"raftmaster_leader_changes_total", nil, 2},
		{"raftmaster_is_voter", nil, 1},
		{"raftmaster_voters", nil, 3},
		{"raftmaster_commit_duration_seconds", nil, 2},
		{"raftmaster_fsm_apply_duration_seconds", nil, 1},
		{"raftmaster_http_request_duration_seconds", []string{"route=POST /v1/jobs/{job}/task/get", "code=200"}, 1},
		{"raftmaster_commands_total", []string{"raftmaster_job=train", "command=GetTask", "outcome=ok"}, 1},
		{"raftmaster_job_tasks", []string{"raftmaster_job=train", "state=todo"}, 2},
		{"raftmaster_job_tasks", []string{"raftmaster_job=train", "state=pending"}, 1},
		{"raftmaster_job_tasks", []string{"raftmaster_job=train", "state=done"}, 1},
		{"raftmaster_job_tasks", []string{"raftmaster_job=train", "state=failed"}, 0},
		{"raftmaster_jobs", nil, 1},
		{"raftmaster_sessions", nil, 0},
		{"raftmaster_sessions_expired_total", nil, 2},
		{"raftmaster_session_tasks_revoked_total", nil, 1},
		{"raftmaster_session_checkpoints_total", nil, 3},
	} {
		if v := value(t, got, c.name, c.labels...); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}

	view = Leadership{Raft: &RaftView{Term: 8, LeaderChanges: 2}}
	got = scrape(t, m)
	if v := value(t, got, "raftmaster_has_leader"); v != 0 {
		t.Errorf("raftmaster_has_leader = %v without a leader, want 0", v)
	}
	if v := value(t, got, "raftmaster_is_leader"); v != 0 {
		t.Errorf("raftmaster_is_leader = %v on a follower, want 0", v)
	}
}

// TestEtcdReplica: a replica without Raft says whether it knows a leader
// and leads, and serves no Raft series.
func TestEtcdReplica(t *testing.T) {
	f := fsm.New()
	m, err := New(Config{FSM: func() *fsm.FSM { return f }, Leadership: func() Leadership { return Leadership{HasLeader: true} }})
	if err != nil {
		t.Fatal(err)
	}
	got := scrape(t, m)
	if v := value(t, got, "raftmaster_has_leader"); v != 1 {
		t.Errorf("raftmaster_has_leader = %v, want 1", v)
	}
	if v := value(t, got, "raftmaster_is_leader"); v != 0 {
		t.Errorf("raftmaster_is_leader = %v, want 0", v)
	}
	for _, name := range []string{"raftmaster_term", "raftmaster_leader_changes_total", "raftmaster_voters", "raftmaster_is_voter"} {
		if _, ok := got[name]; ok {
			t.Errorf("%s served without Raft", name)
		}
	}
}

// TestDeployedQueries: every raftmaster series that the Grafana dashboard
// and the alert rules in deploy/ query is one a replica serves (raft's
// own, raftmaster_raft_*, aside), and the dashboard shows training jobs by
// raftmaster_job, never by Prometheus' job label.
func TestDeployedQueries(t *testing.T) {
	f := newFSM(t)
	m, err := New(Config{FSM: func() *fsm.FSM { return f }, Leadership: func() Leadership {
		return Leadership{HasLeader: true, Raft: &RaftView{Term: 1, Voter: true, Voters: 3}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	m.Request("GET /v1/status", 200, time.Millisecond)
	m.Applied(&fsm.GetTask{Header: fsm.Header{Job: "train"}}, &fsm.Result{Code: fsm.CodeOK})
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	var own []string
	for _, mf := range families {
		name := mf.GetName()
		served[name] = true
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			served[name+"_bucket"], served[name+"_count"], served[name+"_sum"] = true, true, true
		}
		if strings.HasPrefix(name, "raftmaster_") && !strings.HasPrefix(name, "raftmaster_raft_") {
			own = append(own, name)
		}
	}
	for _, name := range own {
		if !slices.Contains(ownMetrics, name) {
			t.Errorf("%s is served but not in ownMetrics, which the lint checks", name)
		}
	}
	names := regexp.MustCompile(`raftmaster_[A-Za-z0-9_]+`)
	for _, path := range []string{"../../deploy/grafana/raftmaster.json", "../../deploy/prometheus/alerts.yaml"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names.FindAllString(string(b), -1) {
			if name == JobLabel || strings.HasPrefix(name, "raftmaster_raft_") {
				continue
			}
			if !served[name] {
				t.Errorf("%s queries %s, which no replica serves", path, name)
			}
		}
	}
	dashboard, err := os.ReadFile("../../deploy/grafana/raftmaster.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr   string `json:"expr"`
				Legend string `json:"legendFormat"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		t.Fatalf("the dashboard: %v", err)
	}
	byJob := regexp.MustCompile(`\b(by|without) \([^)]*\bjob\b`)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if byJob.MatchString(tg.Expr) || strings.Contains(tg.Legend, "{{job}}") {
				t.Errorf("panel %q shows series by job, Prometheus' scrape job: %s (%s)", p.Title, tg.Expr, tg.Legend)
			}
		}
	}
}

// TestMixtureSources: each source of a mixture job has its records and
// tasks finished, exact, its weight as a number (1.0 is fsm.WeightUnit)
// and its pass; a job of one source has no source series.
func TestMixtureSources(t *testing.T) {
	f := newFSM(t)
	index := f.AppliedIndex()
	apply := func(c fsm.Command) *fsm.Result {
		t.Helper()
		index++
		c.Hdr().Now = int64(index) * int64(time.Millisecond)
		c.Hdr().Job = "mix"
		r := f.ApplyEntry(index, fsm.Encode(c))
		if r.Code != fsm.CodeOK {
			t.Fatalf("%T: %v %s", c, r.Code, r.Message)
		}
		return r
	}
	index++
	if r := f.ApplyEntry(index, fsm.Encode(&fsm.SetProtocol{Level: fsm.Protocol9})); r.Code != fsm.CodeOK {
		t.Fatalf("SetProtocol: %v", r.Code)
	}
	chunks := []fsm.Chunk{{Path: "a", Records: 3}, {Path: "a", Offset: 10, Records: 4}, {Path: "b", Records: 5}}
	apply(&fsm.SetDataset{Params: fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Hour, FailureMax: 3, Seed: 1,
		Sources: []fsm.Source{{Name: "a", Weight: fsm.WeightUnit / 2, Chunks: 2}, {Name: "b", Weight: 3 * fsm.WeightUnit / 2, Chunks: 1}}}, Chunks: chunks})
	// By deficit over records: b (5 records for 1.5), a (3 for 0.5),
	// then b again, in its next pass.
	records, finished := map[string]int64{}, map[string]int64{}
	for range 3 {
		r := apply(&fsm.GetTask{Pass: f.Pass("mix")})
		apply(&fsm.TaskFinished{Meta: r.Task.Meta})
		finished[r.Task.Source]++
		for _, c := range r.Task.Chunks {
			records[r.Task.Source] += int64(c.Records)
		}
	}
	apply(&fsm.SetWeights{Weights: []fsm.SourceWeight{{Name: "b", Weight: 2_500_000}}})

	m, err := New(Config{FSM: func() *fsm.FSM { return f }})
	if err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(m.Registry, ownMetrics...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	got := scrape(t, m)
	if records["a"] != 3 || records["b"] != 10 || finished["a"] != 1 || finished["b"] != 2 {
		t.Fatalf("the tasks finished hold %v records and are %v tasks by source, want a's first and b's twice", records, finished)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"raftmaster_source_records_total", []string{"raftmaster_job=mix", "source=a"}, 3},
		{"raftmaster_source_records_total", []string{"raftmaster_job=mix", "source=b"}, 10},
		{"raftmaster_source_tasks_finished_total", []string{"raftmaster_job=mix", "source=a"}, 1},
		{"raftmaster_source_tasks_finished_total", []string{"raftmaster_job=mix", "source=b"}, 2},
		{"raftmaster_source_weight", []string{"raftmaster_job=mix", "source=a"}, 0.5},
		{"raftmaster_source_weight", []string{"raftmaster_job=mix", "source=b"}, 2.5},
		{"raftmaster_source_pass", []string{"raftmaster_job=mix", "source=a"}, 0},
		{"raftmaster_source_pass", []string{"raftmaster_job=mix", "source=b"}, 2},
	} {
		if v := value(t, got, c.name, c.labels...); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	for _, name := range []string{"raftmaster_source_records_total", "raftmaster_source_weight"} {
		for _, s := range got[name].GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == JobLabel && l.GetValue() != "mix" {
					t.Errorf("%s has a series of job %q, which has one source", name, l.GetValue())
				}
			}
		}
	}
}
