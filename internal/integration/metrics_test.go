package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// TestMetrics: every node serves /metrics in Prometheus' text format, with
// raft's own metrics, every job's state and the API's requests and
// command outcomes, labelled by job.
func TestMetrics(t *testing.T) {
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
	// A trainer of job "stalled" leases a task and vanishes: its lease
	// runs out.
	stalled := newClient(t, at, client.WithJob("stalled"))
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
				if l.GetName() == "job" && l.GetValue() == "stalled" {
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
	for _, want := range []struct {
		name   string
		labels []string
	}{
		{"raftmaster_job_tasks", []string{"job=metered", "queue=todo"}},
		{"raftmaster_job_pass", []string{"job=metered"}},
		{"raftmaster_job_save_lease_held", []string{"job=metered"}},
		{"raftmaster_job_leases_expired_total", []string{"job=metered"}},
		{"raftmaster_job_allgather_groups", []string{"job=metered"}},
		{"raftmaster_http_redirects_total", nil},
		{"raftmaster_dedup_hits_total", nil},
		{"raftmaster_jobs", nil},
		{"raftmaster_applied_index", nil},
		{"raftmaster_commands_total", []string{"job=metered", "command=GetTask", "outcome=ok"}},
		{"raftmaster_commands_total", []string{"job=metered", "command=RequestSaveModel", "outcome=granted"}},
		{"raftmaster_http_request_duration_seconds", []string{"route=POST /v1/jobs/{job}/task/get", "code=200"}},
		{"raftmaster_raft_commitTime", nil},
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
