package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestMetrics: every node serves /metrics in Prometheus' text format, with
// raft's own metrics, every job's state and the API's requests and
// command outcomes, labelled raftmaster_job (Prometheus keeps "job" for
// its scrape job).
func TestMetrics(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--chunks-per-task", "1"}})
	c.WaitReady()
	at := client.WithAddrs(c.APIAddrs()...)
	if err := newClient(t, at, client.WithJob("metered")).SetDataset([]string{writeDataset(t, t.TempDir(), 20, 10, 60)}); err != nil {
		t.Fatal(err)
	}
	var log passLog
	startTrainers(t, 2, 1, &log, at, client.WithJob("metered"))()
	if ok, err := newClient(t, at, client.WithJob("metered")).RequestSaveModel("t0", time.Minute); err != nil || !ok {
		t.Fatalf("save model: %v %v", ok, err)
	}
	// A trainer of job "stalled", without a session, leases a task and
	// vanishes: its lease runs out.
	stalled := newClient(t, at, client.WithJob("stalled"), client.WithoutSession())
	if _, err := stalled.SetDatasetWithParams([]string{writeDataset(t, t.TempDir(), 4, 4, 60)}, client.DatasetParams{ChunksPerTask: 1, TaskTimeout: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := stalled.GetTask(0); err != nil {
		t.Fatal(err)
	}
	leader := c.Leader()
	var families map[string]*dto.MetricFamily
	scrape := func() {
		t.Helper()
		resp, err := http.Get("http://" + leader.APIAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics: %s", resp.Status)
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		if families, err = parser.TextToMetricFamilies(resp.Body); err != nil {
			t.Fatalf("/metrics does not parse: %v", err)
		}
	}
	expired := func() float64 {
		scrape()
		for _, m := range families["raftmaster_job_leases_expired_total"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "raftmaster_job" && l.GetValue() == "stalled" {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	c.WaitFor("the stalled trainer's lease to expire in /metrics", time.Minute, func() bool { return expired() >= 1 })
	has := func(name string, labels ...string) bool {
		mf, ok := families[name]
		if !ok {
			return false
		}
		for _, m := range mf.GetMetric() {
			var got []string
			for _, l := range m.GetLabel() {
				got = append(got, l.GetName()+"="+l.GetValue())
			}
			all := true
			for _, want := range labels {
				if !strings.Contains(strings.Join(got, ","), want) {
					all = false
				}
			}
			if all {
				return true
			}
		}
		return false
	}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "job" {
					t.Errorf("%s has a job label (%s), which Prometheus renames to exported_job", name, l.GetValue())
				}
			}
		}
	}
	for _, want := range []struct {
		name   string
		labels []string
	}{
		{"raftmaster_job_tasks", []string{"raftmaster_job=metered", "state=todo"}},
		{"raftmaster_job_pass", []string{"raftmaster_job=metered"}},
		{"raftmaster_job_save_lease_held", []string{"raftmaster_job=metered"}},
		{"raftmaster_job_leases_expired_total", []string{"raftmaster_job=metered"}},
		{"raftmaster_job_allgather_groups", []string{"raftmaster_job=metered"}},
		{"raftmaster_http_redirects_total", nil},
		{"raftmaster_dedup_hits_total", nil},
		{"raftmaster_jobs", nil},
		{"raftmaster_applied_index", nil},
		{"raftmaster_commands_total", []string{"raftmaster_job=metered", "command=GetTask", "outcome=ok"}},
		{"raftmaster_commands_total", []string{"raftmaster_job=metered", "command=RequestSaveModel", "outcome=granted"}},
		{"raftmaster_http_request_duration_seconds", []string{"route=POST /v1/jobs/{job}/task/get", "code=200"}},
		{"raftmaster_raft_commitTime", nil},
		{"raftmaster_commit_duration_seconds", nil},
		{"raftmaster_fsm_apply_duration_seconds", nil},
		{"raftmaster_raft_fsm_apply", nil},
	} {
		if !has(want.name, want.labels...) {
			var names []string
			for n := range families {
				names = append(names, n)
			}
			t.Errorf("/metrics lacks %s%v; it has %v", want.name, want.labels, names)
		}
	}
}

// scrapeMetrics reads and parses the /metrics of the node at addr.
func scrapeMetrics(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics: %s", addr, resp.Status)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s/metrics does not parse: %v", addr, err)
	}
	return families
}

// waitMetrics polls cond until it returns "" and fails the test with the
// last thing it returned when timeout passes.
func waitMetrics(t *testing.T, what string, timeout time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metricValue returns the value of the series of family name whose labels
// include labels (name=value pairs), the count of a histogram's; ok is
// false when there is none.
func metricValue(families map[string]*dto.MetricFamily, name string, labels ...string) (v float64, ok bool) {
	for _, m := range families[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			if have[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// TestMetricsLeadership: every node says it has a leader, exactly one that
// it is the leader, all the same term of at least 1, with the leader
// changes each has seen and the voters; the leader's commit latency and
// every node's apply latency histograms count the writes; the tasks of a
// job by state match the job's status; and requests are counted by route
// pattern, never by the path sent.
func TestMetricsLeadership(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	type view struct{ hasLeader, isLeader, term, changes, voter, voters float64 }
	read := func(p *proccluster.Proc) (view, string) {
		f := scrapeMetrics(t, p.APIAddr)
		var v view
		for _, s := range []struct {
			name string
			to   *float64
		}{
			{"raftmaster_has_leader", &v.hasLeader}, {"raftmaster_is_leader", &v.isLeader}, {"raftmaster_term", &v.term},
			{"raftmaster_leader_changes_total", &v.changes}, {"raftmaster_is_voter", &v.voter}, {"raftmaster_voters", &v.voters},
		} {
			var ok bool
			if *s.to, ok = metricValue(f, s.name); !ok {
				return v, fmt.Sprintf("%s serves no %s", p.ID, s.name)
			}
		}
		return v, ""
	}
	waitMetrics(t, "every node's leadership series to agree", time.Minute, func() string {
		leaders, terms := 0, map[float64]bool{}
		for _, p := range c.Procs {
			v, missing := read(p)
			switch {
			case missing != "":
				return missing
			case v.hasLeader != 1 || v.term < 1 || v.changes < 1 || v.voter != 1 || v.voters != 3:
				return fmt.Sprintf("%s: %+v, want has_leader 1, term >= 1, leader changes >= 1, is_voter 1 and 3 voters", p.ID, v)
			}
			leaders += int(v.isLeader)
			terms[v.term] = true
		}
		if leaders != 1 || len(terms) != 1 {
			return fmt.Sprintf("%d nodes say they lead, terms %v", leaders, terms)
		}
		return ""
	})

	leader := c.Leader()
	count := func(p *proccluster.Proc, name string) float64 {
		t.Helper()
		v, ok := metricValue(scrapeMetrics(t, p.APIAddr), name)
		if !ok {
			t.Fatalf("%s serves no %s", p.ID, name)
		}
		return v
	}
	commits := count(leader, "raftmaster_commit_duration_seconds")
	applies := map[string]float64{}
	for _, p := range c.Procs {
		applies[p.ID] = count(p, "raftmaster_fsm_apply_duration_seconds")
	}
	cl := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithJob("latency"))
	const writes = 20
	for i := range writes {
		if _, err := cl.KVCompareAndSet(context.Background(), "k", uint64(i), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := count(leader, "raftmaster_commit_duration_seconds"); got < commits+writes {
		t.Errorf("the leader's commit latency histogram counts %v after %d writes, from %v", got, writes, commits)
	}
	for _, p := range c.Procs {
		waitMetrics(t, p.ID+"'s apply latency histogram to count the writes", time.Minute, func() string {
			if got := count(p, "raftmaster_fsm_apply_duration_seconds"); got < applies[p.ID]+writes {
				return fmt.Sprintf("it counts %v after %d writes, from %v", got, writes, applies[p.ID])
			}
			return ""
		})
	}

	// Tasks by state: 6 tasks, one leased, one finished, one failed for
	// good (no failure allowed).
	jc := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithJob("states"))
	none := 0
	if _, err := jc.SetDatasetWithParams([]string{writeDataset(t, t.TempDir(), 6, 1, 60)},
		client.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Hour, FailureMax: &none}); err != nil {
		t.Fatal(err)
	}
	var leased []client.Task
	for range 3 {
		task, err := jc.GetTask(0)
		if err != nil {
			t.Fatal(err)
		}
		leased = append(leased, task)
	}
	if err := jc.TaskFinished(leased[0].Meta); err != nil {
		t.Fatal(err)
	}
	if err := jc.TaskFailed(leased[1].Meta); err != nil {
		t.Fatal(err)
	}
	job, err := jc.Job("states")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"todo": job.Todo, "pending": job.Pending, "done": job.Done, "failed": job.Failed}
	if want["todo"] != 3 || want["pending"] != 1 || want["done"] != 1 || want["failed"] != 1 {
		t.Fatalf("job states: %+v, want 3 todo, 1 pending, 1 done and 1 failed", job)
	}
	for _, p := range c.Procs {
		waitMetrics(t, p.ID+"'s tasks by state to match the job's status", time.Minute, func() string {
			f := scrapeMetrics(t, p.APIAddr)
			got := map[string]float64{}
			for state := range want {
				got[state], _ = metricValue(f, "raftmaster_job_tasks", "raftmaster_job=states", "state="+state)
			}
			for state, n := range want {
				if v, ok := metricValue(f, "raftmaster_job_tasks", "raftmaster_job=states", "state="+state); !ok || v != float64(n) {
					return fmt.Sprintf("raftmaster_job_tasks %v, want %v", got, want)
				}
			}
			return ""
		})
	}

	// Routes: a job's route and a path that matches none are counted by
	// their pattern.
	for _, path := range []string{rpc.JobRoute(rpc.PathJob, "probe-job-path"), "/no/such/probe-path"} {
		resp, err := http.Get("http://" + leader.APIAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	f := scrapeMetrics(t, leader.APIAddr)
	if _, ok := metricValue(f, "raftmaster_http_request_duration_seconds", "route=GET "+rpc.PathJob, "code=404"); !ok {
		t.Errorf("no request latency of route %q, code 404", "GET "+rpc.PathJob)
	}
	if _, ok := metricValue(f, "raftmaster_http_request_duration_seconds", "route=/", "code=404"); !ok {
		t.Errorf("no request latency of route \"/\" (no endpoint), code 404")
	}
	for _, m := range f["raftmaster_http_request_duration_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if strings.Contains(l.GetValue(), "probe") {
				t.Errorf("request latency labelled with the path sent: %s=%q", l.GetName(), l.GetValue())
			}
		}
	}
}
