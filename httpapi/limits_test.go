package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestLimitsRoutes: the limits read as the state holds them; a change
// sets the limits it names and keeps the others; 0 brings a limit back to
// its default; a retried change is applied once.
func TestLimitsRoutes(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	var got rpc.Limits
	e.get(rpc.PathLimits).decode(t, &got)
	if want := httpapi.LimitsFromFSM(fsm.Limits{}.Effective()); got != want {
		t.Fatalf("limits of a new state %+v, want the defaults %+v", got, want)
	}
	five, hour := 5, rpc.Duration(time.Hour)
	var set rpc.Limits
	e.ok(rpc.PathLimitsSet, rpc.LimitsRequest{MaxJobs: &five}, &set)
	want := httpapi.LimitsFromFSM(fsm.Limits{MaxJobs: 5}.Effective())
	if set != want {
		t.Fatalf("after setting max_jobs: %+v, want %+v", set, want)
	}
	e.ok(rpc.PathLimitsSet, rpc.LimitsRequest{JobTTL: &hour}, &set)
	want.JobTTL = hour
	if set != want {
		t.Fatalf("after setting job_ttl: %+v, want max_jobs kept: %+v", set, want)
	}
	e.get(rpc.PathLimits).decode(t, &got)
	var jobs rpc.JobsResponse
	e.get(rpc.PathJobs).decode(t, &jobs)
	if got != want || jobs.Limits != want {
		t.Fatalf("limits read back %+v, in the job list %+v; want %+v", got, jobs.Limits, want)
	}

	// A retried change is not applied again over a later one.
	id := reqID(uuid.New(), 1)
	seven, zero := 7, 0
	e.ok(rpc.PathLimitsSet, rpc.LimitsRequest{MaxJobs: &seven}, &set, id...)
	e.ok(rpc.PathLimitsSet, rpc.LimitsRequest{MaxJobs: &zero}, &set)
	before := e.state()
	e.ok(rpc.PathLimitsSet, rpc.LimitsRequest{MaxJobs: &seven}, &set, id...)
	if set.MaxJobs != fsm.DefaultMaxJobs || set.JobTTL != hour || e.state().hash != before.hash {
		t.Fatalf("a retried change %+v, want max_jobs at its default (a later change), nothing applied", set)
	}
}

// TestLimitsUnderEarlierNames: a change names the renamed limits under
// their names or, as clients of earlier releases do, under their earlier
// names (max_job_group_data, max_kv_value); the answer carries both.
func TestLimitsUnderEarlierNames(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	r := e.post(rpc.PathLimitsSet, json.RawMessage(`{"max_job_group_data":8192,"max_kv_value":4096}`))
	var fields map[string]any
	if err := json.Unmarshal(r.body, &fields); r.status != http.StatusOK || err != nil {
		t.Fatalf("a change under the earlier names: status %d: %s", r.status, r.body)
	}
	for name, want := range map[string]float64{"max_job_group_bytes": 8192, "max_job_group_data": 8192, "max_kv_value_bytes": 4096, "max_kv_value": 4096} {
		if fields[name] != want {
			t.Errorf("the answer has %s %v, want %v: %s", name, fields[name], want, r.body)
		}
	}
	var set rpc.Limits
	e.ok(rpc.PathLimitsSet, json.RawMessage(`{"max_kv_value_bytes":100}`), &set)
	if want := httpapi.LimitsFromFSM(fsm.Limits{MaxJobGroupBytes: 8192, MaxKVValueBytes: 100}.Effective()); set != want {
		t.Fatalf("after a change under the name of now: %+v, want %+v", set, want)
	}
}

// TestLimitsSetBelowProtocol2: a cluster whose new leaders still propose
// their own flags, below protocol level 2, refuses a change of its limits
// that the next fail-over would undo, and changes nothing.
func TestLimitsSetBelowProtocol2(t *testing.T) {
	b := &level1{f: fsm.New()}
	e := newEnv(t, testConfig(), func(l *apitest.Local) httpapi.Backend { b.Local = l; return b }, nil)
	five := 5
	before := b.f.StateHash()
	msg := wantError(t, e.post(rpc.PathLimitsSet, rpc.LimitsRequest{MaxJobs: &five}), http.StatusServiceUnavailable, rpc.CodeUnavailable).Message
	if b.f.StateHash() != before || b.f.Limits().MaxJobs != fsm.DefaultMaxJobs {
		t.Fatal("a refused change of the limits changed the state")
	}
	t.Logf("refused: %s", msg)
}
