package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestBadInputIsRejectedWithoutStateChange sends malformed and hostile
// requests to the leader: each gets its error code, and the replicated
// state does not change.
func TestBadInputIsRejectedWithoutStateChange(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	leader := c.Leader()
	dir := t.TempDir()
	glob := writeDataset(t, dir, 20, 10, 30)
	corrupt := filepath.Join(dir, "corrupt.recordio")
	if err := os.WriteFile(corrupt, []byte("this is not a recordio file at all, just text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	post := func(path, body string) (int, rpc.Error) {
		resp, err := http.Post("http://"+leader.APIAddr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e rpc.Error
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &e)
		return resp.StatusCode, e
	}
	before := c.Converged(30 * time.Second)

	huge := `{"group":"g","member":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","num_peers":2,"data":"` + strings.Repeat("x", 3<<20) + `"}`
	manyGlobs, _ := json.Marshal(map[string]any{"globs": bytes.Split(bytes.Repeat([]byte("a"), 1000), nil)})
	cases := []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"malformed json", rpc.PathTaskGet, `{"pass":`, 400, "invalid"},
		{"unknown field", rpc.PathTaskGet, `{"pass":0,"bogus":1}`, 400, "invalid"},
		{"trailing data", rpc.PathTaskGet, `{"pass":0} {}`, 400, "invalid"},
		{"negative pass", rpc.PathTaskGet, `{"pass":-1}`, 400, "invalid"},
		{"negative block duration", rpc.PathSaveModel, `{"trainer_id":"t","block_dur":"-5s"}`, 400, "invalid"},
		{"absurd block duration", rpc.PathSaveModel, `{"trainer_id":"t","block_dur":"100000h"}`, 400, "invalid"},
		{"empty trainer id", rpc.PathSaveModel, `{"trainer_id":"","block_dur":"5s"}`, 400, "invalid"},
		{"oversized body", rpc.PathAllgatherJoin, huge, 413, "too_large"},
		{"absurd num peers", rpc.PathAllgatherJoin, `{"group":"g","member":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","num_peers":100000000,"data":1}`, 400, "invalid"},
		{"bad member uuid", rpc.PathAllgatherJoin, `{"group":"g","member":"nope","num_peers":2,"data":1}`, 400, "invalid"},
		{"data not json", rpc.PathAllgatherJoin, `{"group":"g","member":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","num_peers":2}`, 400, "invalid"},
		{"glob matches nothing", rpc.PathDataset, `{"globs":["/nonexistent/*.recordio"]}`, 400, "invalid"},
		{"corrupt recordio", rpc.PathDataset, fmt.Sprintf(`{"globs":[%q]}`, corrupt), 400, "invalid"},
		{"too many globs", rpc.PathDataset, string(manyGlobs), 400, "invalid"},
		{"negative task timeout", rpc.PathDataset, fmt.Sprintf(`{"globs":[%q],"task_timeout":"-1s"}`, glob), 400, "invalid"},
	}
	check := func(t *testing.T, tc struct {
		name, path, body string
		status           int
		code             string
	}) {
		status, e := post(tc.path, tc.body)
		if status != tc.status || e.Code != tc.code {
			t.Fatalf("got %d %q (%s), want %d %q", status, e.Code, e.Message, tc.status, tc.code)
		}
		if e.Message == "" {
			t.Fatalf("error %q has no message", e.Code)
		}
		if tc.name == "corrupt recordio" && !strings.Contains(e.Message, "corrupt.recordio") {
			t.Fatalf("message %q does not name the file", e.Message)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { check(t, tc) })
	}
	if after := c.Converged(30 * time.Second); after != before {
		t.Fatalf("state changed by rejected requests: %s -> %s", before, after)
	}

	if code, e := post(rpc.PathDataset, fmt.Sprintf(`{"globs":[%q]}`, glob)); code != http.StatusOK {
		t.Fatalf("set dataset: %d %+v", code, e)
	}
	// Lease every task: a later pass is then answered pass_after (with a
	// task left to do, a trainer waiting on the next pass would get it).
	for i := 0; ; i++ {
		code, e := post(rpc.PathTaskGet, `{"pass":0}`)
		if code == http.StatusConflict && e.Code == "no_more_available" {
			break
		}
		if code != http.StatusOK || i > 1000 {
			t.Fatalf("lease task %d: %d %+v", i, code, e)
		}
	}
	// The original's errors are outcomes of applied commands (they advance the FSM
	// clock), each with its own code.
	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"pass after", rpc.PathTaskGet, `{"pass":7}`, 409, "pass_after"},
		{"unknown task", rpc.PathTaskFinished, `{"meta":{"id":999,"epoch":1}}`, 404, "unknown_task"},
		{"stale epoch renew", rpc.PathTaskRenew, `{"meta":{"id":1,"epoch":5}}`, 409, "stale_epoch"},
	} {
		t.Run(tc.name, func(t *testing.T) { check(t, tc) })
	}
}
