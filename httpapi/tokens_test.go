package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/internal/auth"
	"github.com/raftmaster/raftmaster/internal/quota"
	"github.com/raftmaster/raftmaster/rpc"
)

const (
	tokA       = "trainer-of-job-a-0123456789"
	tokB       = "trainer-of-job-b-0123456789"
	tokAll     = "trainer-of-every-job-012345"
	tokAll2    = "another-trainer-of-every-job"
	tokOp      = "operator-token-0123456789"
	tokPattern = "trainer-of-team-jobs-012345"
)

// loadTokens writes lines to a token file and loads it.
func loadTokens(t *testing.T, lines ...string) *auth.Tokens {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tk, err := auth.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func tokenEnv(t *testing.T, mod func(*httpapi.Config)) *env {
	cfg := testConfig()
	cfg.Tokens = loadTokens(t, "trainer "+tokA+" a", "trainer "+tokB+" b", "trainer "+tokAll, "trainer "+tokAll2,
		"trainer "+tokPattern+" team-*", "operator "+tokOp)
	if mod != nil {
		mod(&cfg)
	}
	return newEnv(t, cfg, nil, nil)
}

func bearer(tok string) []string { return []string{rpc.HeaderAuthorization, "Bearer " + tok} }

// jobSamples are valid requests to each job endpoint, by path.
var jobSamples = map[string]string{
	rpc.PathDataset:         `{"chunks":[{"path":"/d/f","offset":0,"records":1}]}`,
	rpc.PathWeights:         `{"weights":{"a":1}}`,
	rpc.PathTaskGet:         `{"pass":0}`,
	rpc.PathTaskFinished:    `{"meta":{"id":1,"epoch":1}}`,
	rpc.PathTaskFailed:      `{"meta":{"id":1,"epoch":1}}`,
	rpc.PathTaskRenew:       `{"meta":{"id":1,"epoch":1}}`,
	rpc.PathSaveModel:       `{"trainer_id":"t","block_dur":"1m"}`,
	rpc.PathAllgatherJoin:   `{"group":"g","member":"5b0e2a6c-6a43-4f3e-9a57-2f7d3c1e8b90","num_peers":2,"data":1}`,
	rpc.PathAllgatherLeave:  `{"group":"g","member":"5b0e2a6c-6a43-4f3e-9a57-2f7d3c1e8b90"}`,
	rpc.PathAllgatherWatch:  "?group=g&member=5b0e2a6c-6a43-4f3e-9a57-2f7d3c1e8b90&generation=1&wait=1ms",
	rpc.PathKVGet:           "?key=k",
	rpc.PathKVCompareAndSet: `{"key":"k","version":0,"value":"dg=="}`,
	rpc.PathKVDelete:        `{"key":"k"}`,
	rpc.PathKVDeletePrefix:  `{"prefix":"k"}`,
	rpc.PathKVAdd:           `{"key":"n","amount":1}`,
	rpc.PathKVMultiSet:      `{"pairs":[{"key":"a","value":"dg=="}]}`,
	rpc.PathKVAppend:        `{"key":"k","value":"dg=="}`,
	rpc.PathKVCompareValue:  `{"key":"k","expected":"","desired":"dg=="}`,
	rpc.PathKVMultiGet:      `{"keys":["k"]}`,
	rpc.PathKVNumKeys:       "?prefix=k",
	rpc.PathKVWatch:         "?key=k&wait=0s",
	rpc.PathTaskProgress:    `{"progress":[{"meta":{"id":1,"epoch":1},"consumed":1}]}`,
	// A path that several methods serve has a sample per method.
	http.MethodPost + " " + rpc.PathCursors:  `{"step":1}`,
	http.MethodGet + " " + rpc.PathCursors:   "",
	http.MethodGet + " " + rpc.PathCursor:    "",
	http.MethodDelete + " " + rpc.PathCursor: "",
	rpc.PathCursorRestore:                    `{}`,
}

// TestTokenJobScopes: a trainer token scoped to jobs acts on them, and on
// no other: each job endpoint of another job answers 403 naming the job,
// creates nothing and changes nothing; a pattern covers the jobs it
// matches; an unscoped trainer token and an operator act on every job.
func TestTokenJobScopes(t *testing.T) {
	e := tokenEnv(t, nil)
	for _, ep := range rpc.Endpoints {
		if !ep.Job {
			continue
		}
		sample, ok := jobSamples[ep.Method+" "+ep.Path]
		if !ok {
			sample, ok = jobSamples[ep.Path]
		}
		if !ok {
			t.Fatalf("no sample for %s", ep.Path)
		}
		send := func(tok, job string) response {
			path := strings.Replace(rpc.JobPath(job, ep.Path), "{"+rpc.CursorParam+"}", "1", 1)
			if ep.Method == http.MethodGet {
				return e.do(ep.Method, path+sample, nil, bearer(tok)...)
			}
			return e.do(ep.Method, path, []byte(sample), append(bearer(tok), reqID(uuid.New(), 1)...)...)
		}
		for _, tc := range []struct {
			tok, job string
			allowed  bool
		}{
			{tokA, "a", true}, {tokA, "b", false}, {tokA, fsm.DefaultJob, false},
			{tokB, "a", false}, {tokPattern, "team-x", true}, {tokPattern, "teamx", false},
			{tokAll, "b", true}, {tokOp, "b", true},
		} {
			before := e.state()
			_, existed := e.local.FSM().Job(tc.job)
			r := send(tc.tok, tc.job)
			if !tc.allowed {
				msg := wantError(t, r, http.StatusForbidden, rpc.CodeForbidden).Message
				if !strings.Contains(msg, fmt.Sprintf("job %q", tc.job)) || strings.Contains(msg, tc.tok) {
					t.Errorf("%s %s on %s: message %q should name the job and not the token", ep.Method, ep.Path, tc.job, msg)
				}
				if e.state() != before {
					t.Errorf("%s %s on %s by a token without the job changed the state", ep.Method, ep.Path, tc.job)
				}
				if _, exists := e.local.FSM().Job(tc.job); exists && !existed {
					t.Errorf("%s %s by a token without job %s created it", ep.Method, ep.Path, tc.job)
				}
				continue
			}
			if r.status == http.StatusForbidden || r.status == http.StatusUnauthorized {
				t.Errorf("%s %s on %s: %d %s, want it allowed", ep.Method, ep.Path, tc.job, r.status, r.body)
			}
		}
	}
}

// TestTokenStatusScope: status summarises the default job to a token
// that covers it, and to one scoped to other jobs only the node's and the
// cluster's figures.
func TestTokenStatusScope(t *testing.T) {
	e := tokenEnv(t, nil)
	e.setDataset(3, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: 60e9})
	status := func(tok string) rpc.StatusResponse {
		r := e.do(http.MethodGet, rpc.PathStatus, nil, bearer(tok)...)
		if r.status != http.StatusOK {
			t.Fatalf("status: %d %s", r.status, r.body)
		}
		var st rpc.StatusResponse
		r.decode(t, &st)
		return st
	}
	if st := status(tokAll); !st.FSM.HasDataset || st.FSM.Chunks != 3 {
		t.Fatalf("an unscoped token's status: %+v", st.FSM)
	}
	st := status(tokA)
	if st.FSM.HasDataset || st.FSM.Chunks != 0 || st.FSM.Jobs != 0 || st.FSM.AppliedIndex == 0 {
		t.Fatalf("a token of job a sees the default job: %+v", st.FSM)
	}
}

// TestTokenIdentityBinding: a client id belongs to the token of its first
// request. Another token, even one that covers the same job, cannot
// replay its answers, write under it, or finish its task: each is 403
// foreign_client and changes nothing. Its own token goes on.
func TestTokenIdentityBinding(t *testing.T) {
	e := tokenEnv(t, nil)
	e.setDataset(3, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: 60e9})
	id := uuid.New()
	var got rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{Pass: 0}, &got, append(bearer(tokAll), reqID(id, 1)...)...)
	before := e.state()
	for _, tc := range []struct {
		path string
		body any
		seq  uint64
	}{
		{rpc.PathTaskGet, rpc.GetTaskRequest{Pass: 0}, 1},
		{rpc.PathTaskGet, rpc.GetTaskRequest{Pass: 0}, 2},
		{rpc.PathTaskFinished, rpc.TaskRequest{Meta: got.Task.Meta}, 2},
	} {
		for _, tok := range []string{tokOp, tokAll2} {
			r := e.post(tc.path, tc.body, append(bearer(tok), reqID(id, tc.seq)...)...)
			wantError(t, r, http.StatusForbidden, rpc.CodeForeignClient)
		}
	}
	if e.state() != before {
		t.Fatal("a foreign token's requests changed the state")
	}
	var again rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{Pass: 0}, &again, append(bearer(tokAll), reqID(id, 1)...)...)
	if again.Task.Meta != got.Task.Meta {
		t.Fatalf("the owner's retry: %+v, want %+v", again.Task.Meta, got.Task.Meta)
	}
	e.ok(rpc.PathTaskFinished, rpc.TaskRequest{Meta: got.Task.Meta}, nil, append(bearer(tokAll), reqID(id, 2)...)...)
}

// TestQuotaFlood: past its write quota a token's writes are answered 429
// with Retry-After and change nothing, while another token's still
// pass; past its quota of new client ids a token cannot start one more,
// but its known ids still write.
func TestQuotaFlood(t *testing.T) {
	e := tokenEnv(t, func(c *httpapi.Config) {
		c.WriteQuota = quota.Rate{PerSecond: 0.001, Burst: 10}
		c.ClientQuota = quota.Rate{PerSecond: 0.001, Burst: 3}
	})
	path := rpc.JobPath("a", rpc.PathKVCompareAndSet)
	ids := []uuid.UUID{uuid.New(), uuid.New(), uuid.New(), uuid.New()}
	for i := range 3 {
		e.ok(path, rpc.KVCompareAndSetRequest{Key: fmt.Sprint("k", i), Value: []byte("v")}, nil, append(bearer(tokA), reqID(ids[i], 1)...)...)
	}
	before := e.state()
	r := e.post(path, rpc.KVCompareAndSetRequest{Key: "new", Value: []byte("v")}, append(bearer(tokA), reqID(ids[3], 1)...)...)
	wantError(t, r, http.StatusTooManyRequests, rpc.CodeRateLimited)
	if r.header.Get("Retry-After") == "" || e.state() != before {
		t.Fatalf("a new identity past the quota: Retry-After %q, state changed %v", r.header.Get("Retry-After"), e.state() != before)
	}
	seq := uint64(2)
	for ; seq < 20; seq++ {
		r = e.post(path, rpc.KVCompareAndSetRequest{Key: "k0", Version: 1 << 40, Value: []byte("v")}, append(bearer(tokA), reqID(ids[0], seq)...)...)
		if r.status == http.StatusTooManyRequests {
			break
		}
		if r.status != http.StatusOK {
			t.Fatalf("write %d: %d %s", seq, r.status, r.body)
		}
	}
	if seq != 9 { // 10 writes: 3 above, 6 here, and the refused one
		t.Fatalf("refused at sequence %d, want 9 (after the burst of 10, one refused)", seq)
	}
	before = e.state()
	r = e.post(path, rpc.KVCompareAndSetRequest{Key: "k0", Version: 1, Value: []byte("w")}, append(bearer(tokA), reqID(ids[0], seq+1)...)...)
	wantError(t, r, http.StatusTooManyRequests, rpc.CodeRateLimited)
	if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" || e.state() != before {
		t.Fatalf("a write past the quota: Retry-After %q, state changed %v", ra, e.state() != before)
	}
	e.ok(rpc.JobPath("b", rpc.PathKVCompareAndSet), rpc.KVCompareAndSetRequest{Key: "k", Value: []byte("v")}, nil, append(bearer(tokB), reqID(uuid.New(), 1)...)...)
}

// TestDefaultQuotasPassTenThousandTrainers: with the default quotas,
// 10,000 trainers under one job token each start an identity and write,
// and then all restart at once, with new identities: every write passes.
func TestDefaultQuotasPassTenThousandTrainers(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 trainers twice over: a load run, not a unit test")
	}
	e := tokenEnv(t, func(c *httpapi.Config) {
		c.WriteQuota = httpapi.DefaultWriteQuota
		c.ClientQuota = httpapi.DefaultClientQuota
	})
	const trainers = 10000
	path := rpc.JobPath("a", rpc.PathSaveModel)
	var refused atomic.Int64
	var firstErr atomic.Value
	round := func(name string) {
		var wg sync.WaitGroup
		next := atomic.Int64{}
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= trainers {
						return
					}
					b, _ := json.Marshal(rpc.SaveModelRequest{TrainerID: fmt.Sprint("t", i), BlockDur: rpc.Duration(1e9)})
					req, _ := http.NewRequest(http.MethodPost, e.ts.URL+path, strings.NewReader(string(b)))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set(rpc.HeaderAuthorization, "Bearer "+tokA)
					req.Header.Set(rpc.HeaderRequestID, uuid.NewString()+"/1")
					resp, err := e.client.Do(req)
					if err != nil {
						firstErr.CompareAndSwap(nil, err.Error())
						refused.Add(1)
						continue
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						firstErr.CompareAndSwap(nil, fmt.Sprintf("%s: %s", name, resp.Status))
						refused.Add(1)
					}
				}
			}()
		}
		wg.Wait()
	}
	round("start")
	round("restart")
	if n := refused.Load(); n != 0 {
		t.Fatalf("%d of %d writes refused with the default quotas; first: %v", n, 2*trainers, firstErr.Load())
	}
}

// TestQuotaPerAddressWithoutTokens: a server without tokens has a quota
// only when one is configured, and then counts writes per source address.
func TestQuotaPerAddressWithoutTokens(t *testing.T) {
	open := newEnv(t, testConfig(), nil, nil)
	for range 50 {
		open.ok(rpc.PathSaveModel, rpc.SaveModelRequest{TrainerID: "t", BlockDur: rpc.Duration(1e9)}, nil, reqID(uuid.New(), 1)...)
	}
	cfg := testConfig()
	cfg.WriteQuota = quota.Rate{PerSecond: 0.001, Burst: 2}
	e := newEnv(t, cfg, nil, nil)
	for range 2 {
		e.ok(rpc.PathSaveModel, rpc.SaveModelRequest{TrainerID: "t", BlockDur: rpc.Duration(1e9)}, nil, reqID(uuid.New(), 1)...)
	}
	before := e.state()
	r := e.post(rpc.PathSaveModel, rpc.SaveModelRequest{TrainerID: "t", BlockDur: rpc.Duration(1e9)}, reqID(uuid.New(), 1)...)
	wantError(t, r, http.StatusTooManyRequests, rpc.CodeRateLimited)
	if e.state() != before {
		t.Fatal("a write past the quota changed the state")
	}
}
