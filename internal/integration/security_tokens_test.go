package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// Tokens of the security tests: trainers of job a, of jobs matching
// team-*, of every job (two), a trainer that floods, and an operator.
const (
	secTokA     = "sec-trainer-of-job-a-0123456789"
	secTokTeam  = "sec-trainer-of-team-jobs-01234"
	secTokAll   = "sec-trainer-of-every-job-01234"
	secTokAll2  = "sec-other-trainer-every-job-012"
	secTokFlood = "sec-trainer-that-floods-012345"
	secTokOp    = "sec-operator-token-0123456789"
)

// writeTokenFile writes lines to a token file of mode 0600.
func writeTokenFile(t *testing.T, lines ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// rawCall sends one request to the node at addr with a token and, for a
// write, a request id, and returns the status, the error body's code and
// the Retry-After header.
func rawCall(t *testing.T, addr, method, path, token, reqID, body string) (int, string, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(rpc.HeaderAuthorization, "Bearer "+token)
	if reqID != "" {
		req.Header.Set(rpc.HeaderRequestID, reqID)
		req.Header.Set("Content-Type", "application/json")
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e rpc.Error
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e.Code, resp.Header.Get("Retry-After")
}

// secStateHash is the leader's state hash, read with the operator token.
func secStateHash(t *testing.T, addr string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+rpc.PathDebugState, nil)
	req.Header.Set(rpc.HeaderAuthorization, "Bearer "+secTokOp)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st rpc.DebugStateResponse
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Hash
}

// forbidden reports whether err is a 403 forbidden that names job.
func forbidden(err error, job string) bool {
	var e *rpc.Error
	return errors.As(err, &e) && e.Code == rpc.CodeForbidden && strings.Contains(e.Message, fmt.Sprintf("job %q", job))
}

// TestSecurityTokensJobMatrix starts a cluster whose token file scopes
// trainer tokens to jobs, and checks the matrix with the Go client: a
// token of job a sets datasets, leases tasks, asks for the save-model
// lease, joins allgather groups and writes the register of job a, and of
// no other job (403 naming the job, nothing created); it does not see the
// default job in its status, nor use cluster routes; a pattern covers the
// jobs it matches; an unscoped trainer token and the operator act on every
// job. Past its write quota a token is answered 429 with Retry-After, and
// nothing changes.
func TestSecurityTokensJobMatrix(t *testing.T) {
	needsProcesses(t)
	file := writeTokenFile(t, "trainer "+secTokA+" a", "trainer "+secTokTeam+" team-*", "trainer "+secTokAll,
		"trainer "+secTokFlood, "operator "+secTokOp)
	t.Setenv("RAFTMASTER_TOKEN", secTokOp) // the cluster's own checks
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--auth-tokens", file, "--write-quota", "1", "--write-burst", "300"}})
	c.WaitReady()
	dir := t.TempDir()
	glob := writeDataset(t, dir, 2, 20, 64)
	// Without sessions: opening one is a write of the cluster's, which
	// any token may make, and would change the state a refused call must
	// leave as it was.
	as := func(tok, job string) *client.Client {
		return newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithToken(tok), client.WithJob(job), client.WithRetry(30*time.Second),
			client.WithoutSession())
	}
	op := as(secTokOp, "default")
	jobExists := func(name string) bool {
		jobs, err := op.Jobs()
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs.Jobs {
			if j.Name == name {
				return true
			}
		}
		return false
	}
	// actions are the job endpoints a trainer uses, through the Go client.
	actions := []struct {
		name string
		do   func(*client.Client) error
	}{
		{"set dataset", func(cl *client.Client) error { return cl.SetDataset([]string{glob}) }},
		{"get task", func(cl *client.Client) error { _, err := cl.GetTask(0); return err }},
		{"save model", func(cl *client.Client) error { _, err := cl.RequestSaveModel("t0", time.Second); return err }},
		{"kv cas", func(cl *client.Client) error {
			_, err := cl.KVCompareAndSet(context.Background(), "torchrun/rdzv/run", 0, []byte("state"))
			return err
		}},
		{"kv get", func(cl *client.Client) error {
			_, err := cl.KVGet(context.Background(), "torchrun/rdzv/run")
			return err
		}},
		{"allgather", func(cl *client.Client) error {
			id := uuid.New()
			if _, err := cl.Join("g", id, 2, 1, nil, nil); err != nil {
				return err
			}
			return cl.Leave("g", id)
		}},
	}

	t.Run("a token of job a acts on job a", func(t *testing.T) {
		cl := as(secTokA, "a")
		for _, a := range actions {
			if err := a.do(cl); forbidden(err, "a") {
				t.Errorf("%s on job a: %v", a.name, err)
			} else if err != nil {
				t.Errorf("%s on job a: %v", a.name, err)
			}
		}
	})
	t.Run("a token of job a cannot act on job b, nor create it", func(t *testing.T) {
		cl := as(secTokA, "b")
		for _, a := range actions {
			before := secStateHash(t, c.Leader().APIAddr)
			err := a.do(cl)
			if !forbidden(err, "b") {
				t.Errorf("%s on job b with a token of job a: %v, want 403 naming job b", a.name, err)
			}
			if after := secStateHash(t, c.Leader().APIAddr); after != before {
				t.Errorf("%s on job b with a token of job a changed the state", a.name)
			}
		}
		if jobExists("b") {
			t.Error("a token of job a created job b")
		}
	})
	t.Run("a pattern covers the jobs it matches", func(t *testing.T) {
		if err := as(secTokTeam, "team-x").SetDataset([]string{glob}); err != nil {
			t.Errorf("team-* on team-x: %v", err)
		}
		if err := as(secTokTeam, "teamx").SetDataset([]string{glob}); !forbidden(err, "teamx") {
			t.Errorf("team-* on teamx: %v, want 403", err)
		}
	})
	t.Run("an unscoped trainer token and the operator act on every job", func(t *testing.T) {
		if err := as(secTokAll, "b").SetDataset([]string{glob}); err != nil {
			t.Errorf("an unscoped trainer on job b: %v", err)
		}
		if _, err := as(secTokOp, "c").RequestSaveModel("op", time.Second); err != nil {
			t.Errorf("the operator on job c: %v", err)
		}
		if _, err := op.CreateJob("d"); err != nil {
			t.Errorf("the operator creating job d: %v", err)
		}
	})
	t.Run("status shows a token of job a no other job's state", func(t *testing.T) {
		if err := as(secTokAll, "default").SetDataset([]string{glob}); err != nil {
			t.Fatal(err)
		}
		if st, err := as(secTokAll, "default").Status(); err != nil || !st.FSM.HasDataset {
			t.Fatalf("an unscoped token's status: %+v %v", st.FSM, err)
		}
		st, err := as(secTokA, "a").Status()
		if err != nil || st.FSM.HasDataset || st.FSM.Chunks != 0 || st.FSM.Jobs != 0 {
			t.Fatalf("a token of job a sees the default job: %+v %v", st.FSM, err)
		}
	})
	t.Run("cluster routes need the operator", func(t *testing.T) {
		cl := as(secTokA, "a")
		for name, do := range map[string]func() error{
			"jobs":       func() error { _, err := cl.Jobs(); return err },
			"members":    func() error { _, err := cl.Members(); return err },
			"limits":     func() error { _, err := cl.Limits(); return err },
			"create job": func() error { _, err := cl.CreateJob("a"); return err },
			"delete job": func() error { return cl.DeleteJob("a") },
			"backup":     func() error { _, err := cl.BackupTo(context.Background(), io.Discard); return err },
		} {
			var e *rpc.Error
			if err := do(); !errors.As(err, &e) || e.Code != rpc.CodeForbidden {
				t.Errorf("%s with a trainer token: %v, want 403", name, err)
			}
		}
		if _, err := op.Members(); err != nil {
			t.Errorf("members with the operator token: %v", err)
		}
	})
	t.Run("past its write quota a token gets 429 with Retry-After", func(t *testing.T) {
		leader := c.Leader().APIAddr
		id := uuid.NewString()
		var status int
		var code, retryAfter string
		seq := 1
		for ; seq <= 1000 && status != http.StatusTooManyRequests; seq++ {
			status, code, retryAfter = rawCall(t, leader, http.MethodPost, "/v1/jobs/flood/kv/cas", secTokFlood,
				fmt.Sprintf("%s/%d", id, seq), fmt.Sprintf(`{"key":"k%d","version":0,"value":"dg=="}`, seq))
			if status != http.StatusOK && status != http.StatusTooManyRequests {
				t.Fatalf("write %d: %d %s", seq, status, code)
			}
		}
		if status != http.StatusTooManyRequests || code != rpc.CodeRateLimited || retryAfter == "" {
			t.Fatalf("1000 writes past a quota of 300 and 1/s: last %d %q Retry-After %q", status, code, retryAfter)
		}
		status, code, _ = rawCall(t, leader, http.MethodPost, "/v1/jobs/flood/kv/cas", secTokFlood,
			fmt.Sprintf("%s/%d", id, seq), `{"key":"refused","version":0,"value":"dg=="}`)
		if status != http.StatusTooManyRequests {
			t.Fatalf("a write past the quota: %d %s", status, code)
		}
		// Refused, not applied. (The state's hash would not tell: the
		// leader ticks meanwhile while anything waits on a deadline.)
		if v, err := as(secTokAll, "flood").KVGet(context.Background(), "refused"); err != nil || v.Found {
			t.Fatalf("the write refused past the quota: the key is %+v (%v), want absent", v, err)
		}
		// Another token's quota is its own.
		if err := as(secTokAll, "flood").SetDataset([]string{glob}); err != nil {
			t.Fatalf("another token after the flood: %v", err)
		}
	})
}

// TestSecurityTokensIdentityBinding: a client identity belongs to the
// token of its first request. Another token that covers the same job
// cannot replay its answers, write under it, nor finish its task: 403
// foreign_client, and nothing changes. Its own token goes on.
func TestSecurityTokensIdentityBinding(t *testing.T) {
	needsProcesses(t)
	file := writeTokenFile(t, "trainer "+secTokAll, "trainer "+secTokAll2, "operator "+secTokOp)
	t.Setenv("RAFTMASTER_TOKEN", secTokOp)
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--auth-tokens", file}})
	c.WaitReady()
	leader := c.Leader().APIAddr
	id := uuid.NewString()
	body := `{"key":"k","version":0,"value":"dg=="}`
	if status, code, _ := rawCall(t, leader, http.MethodPost, "/v1/jobs/a/kv/cas", secTokAll, id+"/1", body); status != http.StatusOK {
		t.Fatalf("the owner's first write: %d %s", status, code)
	}
	before := secStateHash(t, leader)
	for _, tc := range []struct{ what, reqID, body string }{
		{"a replay of the owner's request", id + "/1", body},
		{"a new request under its id", id + "/2", `{"key":"k","version":1,"value":"cG9pc29u"}`},
		{"a request far ahead of it", id + "/1000", `{"key":"k2","version":0,"value":"cG9pc29u"}`},
	} {
		status, code, _ := rawCall(t, leader, http.MethodPost, "/v1/jobs/a/kv/cas", secTokAll2, tc.reqID, tc.body)
		if status != http.StatusForbidden || code != rpc.CodeForeignClient {
			t.Errorf("%s by another token: %d %q, want 403 %s", tc.what, status, code, rpc.CodeForeignClient)
		}
	}
	if after := secStateHash(t, leader); after != before {
		t.Fatal("another token's requests under the identity changed the state")
	}
	if status, code, _ := rawCall(t, leader, http.MethodPost, "/v1/jobs/a/kv/cas", secTokAll, id+"/2",
		`{"key":"k","version":1,"value":"b3du"}`); status != http.StatusOK {
		t.Fatalf("the owner's next write: %d %s", status, code)
	}
}

// TestSecurityTokensFileMode: serve refuses a token file that other users
// may read, naming chmod 600.
func TestSecurityTokensFileMode(t *testing.T) {
	needsProcesses(t)
	file := writeTokenFile(t, "trainer "+secTokAll, "operator "+secTokOp)
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, proccluster.Binary(t), "serve", "--node-id", "n1", "--data-dir", t.TempDir(),
		"--raft-addr", proccluster.FreePort(t), "--http-addr", proccluster.FreePort(t), "--auth-tokens", file)
	if help, _ := exec.Command(proccluster.Binary(t), "serve", "--help").CombinedOutput(); bytes.Contains(help, []byte("--insecure")) {
		// A build whose serve needs TLS or a cluster key unless told
		// otherwise: the token file is what this test is about.
		cmd.Args = append(cmd.Args, "--insecure")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("serve ran on with a token file of mode 0644 (stderr: %s)", stderr.String())
	}
	if err == nil || !strings.Contains(stderr.String(), "chmod 600") {
		t.Fatalf("serve with a token file of mode 0644: %v, %s; want a refusal naming chmod 600", err, stderr.String())
	}
}
