package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/rpc"
)

// During a rolling upgrade cluster inspect shows each member's version and
// the level its build applies, and why the cluster's level has not risen.
func TestPrintClusterVersions(t *testing.T) {
	r := rpc.ClusterResponse{ClusterProtocol: 1, Members: []rpc.Member{
		{ID: "n1", Suffrage: "Voter", State: "Leader", Leader: true, Version: "v1.4.0", Protocol: 1},
		{ID: "n2", Suffrage: "Voter", State: "Follower", Version: "v1.5.0", Protocol: 2},
		{ID: "n3", Suffrage: "Voter", Error: "connection refused"},
	}}
	var b bytes.Buffer
	printCluster(&b, r)
	out := b.String()
	for _, want := range []string{"VERSION", "v1.4.0 (level 1)", "v1.5.0 (level 2)",
		"protocol:  level 1 (members apply up to 2: the level rises once every member runs a release that knows it)"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	r.ClusterProtocol = 2
	r.Members[0].Version, r.Members[0].Protocol = "v1.5.0", 2
	b.Reset()
	printCluster(&b, r)
	if out := b.String(); !strings.Contains(out, "protocol:  level 2\n") {
		t.Errorf("after the upgrade:\n%s", out)
	}
}

// TestDurationsAsText: the text outputs print durations as Go durations
// ("1m0s"), not as nanoseconds.
func TestDurationsAsText(t *testing.T) {
	r := rpc.ClusterResponse{FSM: rpc.Stats{HasDataset: true, Chunks: 4, Tasks: 2,
		Params: rpc.DatasetParams{ChunksPerTask: 2, TaskTimeout: rpc.Duration(time.Minute), FailureMax: 3}}}
	var b bytes.Buffer
	printCluster(&b, r)
	if out := b.String(); !strings.Contains(out, "timeout 1m0s") || strings.Contains(out, "60000000000") {
		t.Errorf("cluster inspect:\n%s", out)
	}
	if s := fmt.Sprint(rpc.Duration(90 * time.Second)); s != "1m30s" {
		t.Errorf("rpc.Duration prints %q", s)
	}
}
