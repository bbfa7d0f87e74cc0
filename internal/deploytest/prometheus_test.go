package deploytest

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	alertRules     = "../../deploy/prometheus/alerts.yaml"
	alertRuleTests = "../../deploy/prometheus/alerts_test.yaml"
)

// ruleFile is a Prometheus rule file, strictly: a field Prometheus does
// not know fails the decoding.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// TestPrometheusRules: deploy/prometheus/alerts.yaml holds the alerts an
// operator of a cluster needs (no leader, frequent leader changes, leases
// expiring, quorum at risk, a member behind), each with a severity, a
// summary and a description, and no rule groups by the label "job" of a
// training job; `promtool check rules` accepts the file and `promtool
// test rules` passes its unit tests, deploy/prometheus/alerts_test.yaml,
// when promtool is installed.
func TestPrometheusRules(t *testing.T) {
	b, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(b, &rf); err != nil {
		t.Fatalf("%s: %v", alertRules, err)
	}
	var alerts []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.Labels["severity"] != "critical" && r.Labels["severity"] != "warning" {
				t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s lacks a summary or a description", r.Alert)
			}
			if strings.Contains(r.Expr, `job=`) && !strings.Contains(r.Expr, `raftmaster_job=`) {
				t.Errorf("alert %s selects on job, the scrape job, where a training job is raftmaster_job: %s", r.Alert, r.Expr)
			}
		}
	}
	for _, want := range []string{"RaftmasterNoLeader", "RaftmasterFrequentLeaderChanges", "RaftmasterLeasesExpiring",
		"RaftmasterQuorumAtRisk", "RaftmasterMemberBehind"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("%s has no alert %s; it has %v", alertRules, want, alerts)
		}
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed, so the rules' PromQL and their unit tests were not run: " +
			"install it (Debian: apt-get install prometheus) or run `promtool check rules` and `promtool test rules` by hand")
	}
	if out, err := exec.Command(promtool, "check", "rules", alertRules).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules %s: %v\n%s", alertRules, err, out)
	}
	if out, err := exec.Command(promtool, "test", "rules", alertRuleTests).CombinedOutput(); err != nil {
		t.Errorf("promtool test rules %s: %v\n%s", alertRuleTests, err, out)
	}
}
