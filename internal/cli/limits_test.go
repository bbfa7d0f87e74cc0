package cli

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestLimitsCommands: limits get prints the limits under their flags'
// names; limits set changes only the limits given, 0 bringing one back to
// its default; bad values and no limit at all are refused with a clear
// error, changing nothing; a RAFTMASTER_ variable of serve's sets nothing.
func TestLimitsCommands(t *testing.T) {
	local := apitest.NewLocal()
	ts := httptest.NewServer(httpapi.NewHandler(local, httpapi.Config{}, nil))
	t.Cleanup(ts.Close)
	local.API = strings.TrimPrefix(ts.URL, "http://")
	limits := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := RunWith(append([]string{"raftmaster", "limits", args[0], "--addr", local.API, "--retry", "5s"}, args[1:]...), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, out, errOut := limits("get")
	if code != 0 || !strings.Contains(out, "max-jobs             1024\n") || !strings.Contains(out, "job-ttl              off\n") {
		t.Fatalf("limits get: exit %d, %q, %q", code, out, errOut)
	}
	code, out, errOut = limits("set", "--max-jobs", "5", "--job-ttl", "1h")
	if code != 0 || !strings.Contains(out, "max-jobs             5\n") || !strings.Contains(out, "job-ttl              1h0m0s\n") {
		t.Fatalf("limits set: exit %d, %q, %q", code, out, errOut)
	}
	t.Setenv("RAFTMASTER_MAX_JOB_KV_KEYS", "9") // serve's variable: not limits set's
	code, out, errOut = limits("set", "--max-kv-value-bytes", "4096", "--json")
	var got rpc.Limits
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("limits set --json: exit %d, %q, %q", code, out, errOut)
	}
	want := httpapi.LimitsFromFSM(fsm.Limits{MaxJobs: 5, JobTTL: time.Hour, MaxKVValueBytes: 4096}.Effective())
	if got != want {
		t.Fatalf("limits after two changes %+v, want %+v", got, want)
	}
	if code, _, _ = limits("set", "--max-jobs", "0"); code != 0 || local.FSM().Limits().MaxJobs != fsm.DefaultMaxJobs {
		t.Fatalf("limits set --max-jobs 0: exit %d, max_jobs %d, want the default", code, local.FSM().Limits().MaxJobs)
	}

	before := local.FSM().StateHash()
	for _, bad := range []struct {
		args []string
		says string
	}{
		{[]string{"set"}, "give at least one limit"},
		{[]string{"set", "--max-jobs", "-1"}, "limit max_jobs -1 out of range [0, 65536]"},
		{[]string{"set", "--max-job-kv-keys", "70000"}, "limit max_job_kv_keys 70000 out of range [0, 65536]"},
		{[]string{"set", "--job-ttl", "soon"}, "job-ttl"},
		{[]string{"set", "extra"}, "takes flags only"},
	} {
		code, out, errOut := limits(bad.args...)
		if code == 0 || !strings.Contains(errOut, bad.says) {
			t.Errorf("limits %v: exit %d, %q, %q; want a failure that says %q", bad.args, code, out, errOut, bad.says)
		}
	}
	if local.FSM().StateHash() != before {
		t.Fatal("a refused change of the limits changed the state")
	}
}
