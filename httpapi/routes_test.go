package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/rpc"
)

// sampleMember is the member of the sample allgather requests.
const sampleMember = "5b0e2a6c-6a43-4f3e-9a57-2f7d3c1e8b90"

// samples holds a valid request for each endpoint: the body of a POST, the
// query of a GET.
var samples = map[string]string{
	rpc.PathDataset:             `{"chunks":[{"path":"/a","offset":0,"records":1}]}`,
	rpc.PathWeights:             `{"weights":{"a":1}}`,
	rpc.PathTaskGet:             `{"pass":0}`,
	rpc.PathTaskFinished:        `{"meta":{"id":1,"epoch":1}}`,
	rpc.PathTaskFailed:          `{"meta":{"id":1,"epoch":1}}`,
	rpc.PathTaskRenew:           `{"meta":{"id":1,"epoch":1}}`,
	rpc.PathSaveModel:           `{"trainer_id":"t","block_dur":"1s"}`,
	rpc.PathAllgatherJoin:       `{"group":"g","member":"` + sampleMember + `","num_peers":2,"data":1}`,
	rpc.PathAllgatherLeave:      `{"group":"g","member":"` + sampleMember + `"}`,
	rpc.PathAllgatherWatch:      "?group=g&member=" + sampleMember + "&generation=1&wait=0s",
	rpc.PathStatus:              "",
	rpc.PathCluster:             "",
	rpc.PathClusterAddMember:    `{"id":"n4","raft_addr":"a:1","api_addr":"a:2"}`,
	rpc.PathClusterRemoveMember: `{"id":"n3"}`,
	rpc.PathClusterTransfer:     `{}`,
	rpc.PathDebugState:          "",
	rpc.PathHealthz:             "",
	rpc.PathReadyz:              "",
	rpc.PathJobs:                "",
	rpc.PathJob:                 "",
	rpc.PathJobCreate:           `{}`,
	rpc.PathJobDelete:           `{}`,
	rpc.PathBackup:              "",
	rpc.PathKVGet:               "?key=k",
	rpc.PathKVCompareAndSet:     `{"key":"k","version":0,"value":"dg=="}`,
	rpc.PathKVDelete:            `{"key":"k"}`,
	rpc.PathKVDeletePrefix:      `{"prefix":"k"}`,
	rpc.PathKVAdd:               `{"key":"n","amount":1}`,
	rpc.PathKVMultiSet:          `{"pairs":[{"key":"a","value":"dg=="}]}`,
	rpc.PathKVAppend:            `{"key":"k","value":"dg=="}`,
	rpc.PathKVCompareValue:      `{"key":"k","expected":"","desired":"dg=="}`,
	rpc.PathKVMultiGet:          `{"keys":["k"]}`,
	rpc.PathKVNumKeys:           "?prefix=k",
	rpc.PathKVWatch:             "?key=k&wait=0s",
	rpc.PathLimits:              "",
	rpc.PathLimitsSet:           `{"max_jobs":5}`,
	// A path that several methods serve has a sample per method.
	http.MethodPost + " " + rpc.PathSessions: `{"ttl":"10s"}`,
	http.MethodGet + " " + rpc.PathSessions:  "",
	rpc.PathSessionKeepAlive:                 `{"progress":[{"job":"default","task":1,"epoch":1,"records":5}]}`,
	rpc.PathSession:                          "",
	rpc.PathTaskProgress:                     `{"progress":[{"meta":{"id":1,"epoch":1},"consumed":1}]}`,
	http.MethodPost + " " + rpc.PathCursors:  `{"step":1}`,
	http.MethodGet + " " + rpc.PathCursors:   "",
	http.MethodGet + " " + rpc.PathCursor:    "",
	http.MethodDelete + " " + rpc.PathCursor: "",
	rpc.PathCursorRestore:                    `{}`,
}

// samplePath is the path of endpoint ep's sample request: a job route
// names the default job, a session route an open session, which it
// opens when there is none.
func (e *env) samplePath(ep rpc.Endpoint) string {
	e.t.Helper()
	path := rpc.JobRoute(ep.Path, rpc.DefaultJob)
	if strings.HasPrefix(ep.Path, rpc.PathCursors+"/") {
		return strings.Replace(path, "{"+rpc.CursorParam+"}", fmt.Sprint(e.sampleCursor()), 1)
	}
	if !strings.Contains(path, "{"+rpc.SessionParam+"}") {
		return path
	}
	open := e.local.FSM().Sessions()
	if len(open) == 0 {
		res, err := e.local.Apply(context.Background(), &fsm.OpenSession{Header: fsm.Header{Request: fsm.RequestID{Client: uuid.New(), Seq: 1}}, TTL: time.Minute})
		if err != nil || res.Err() != nil {
			e.t.Fatalf("opening a session: %v %v", err, res.Err())
		}
		open = e.local.FSM().Sessions()
	}
	return strings.Replace(path, "{"+rpc.SessionParam+"}", fmt.Sprint(open[0].ID), 1)
}

// sampleCursor returns the id of a cursor of the default job, which it
// commits, with a dataset, when there is none.
func (e *env) sampleCursor() uint64 {
	e.t.Helper()
	if list, _, _ := e.local.FSM().Cursors(""); len(list) > 0 {
		return list[len(list)-1].ID
	}
	for _, c := range []fsm.Command{
		&fsm.SetDataset{Params: fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute}, Chunks: []fsm.Chunk{{Path: "/d/f", Records: 1}}},
		&fsm.CommitCursor{Step: 1},
	} {
		res, err := e.local.Apply(context.Background(), c)
		if err != nil || res.Err() != nil {
			e.t.Fatalf("%v: %v %v", c.Type(), err, res.Err())
		}
	}
	list, _, _ := e.local.FSM().Cursors("")
	return list[0].ID
}

// sample sends endpoint ep its sample request with method and the header
// pairs.
func (e *env) sample(ep rpc.Endpoint, method string, header ...string) response {
	e.t.Helper()
	s, ok := samples[ep.Method+" "+ep.Path]
	if !ok {
		s, ok = samples[ep.Path]
	}
	if !ok {
		e.t.Fatalf("no sample request for %s %s: add one to samples", ep.Method, ep.Path)
	}
	if ep.Method == http.MethodGet {
		return e.do(method, e.samplePath(ep)+s, nil, header...)
	}
	return e.do(method, e.samplePath(ep), []byte(s), header...)
}

// allowedMethods lists the methods that serve path, HEAD after GET, as a
// 405's Allow does.
func allowedMethods(path string) []string {
	var methods []string
	for _, ep := range rpc.Endpoints {
		if ep.Path == path {
			methods = append(methods, ep.Method)
			if ep.Method == http.MethodGet {
				methods = append(methods, http.MethodHead)
			}
		}
	}
	return methods
}

// standby is a backend whose followers hold no up-to-date state, as the
// etcd backend's standbys: they send watches to the leader too.
type standby struct{ *fakeBackend }

func (standby) ServesFollowerReads() bool { return false }

// Every endpoint of rpc.Endpoints is routed: its method reaches the
// handler, and every other method gets 405 with Allow.
func TestEndpointsRouted(t *testing.T) {
	for _, ep := range rpc.Endpoints {
		t.Run(ep.Method+" "+ep.Path, func(t *testing.T) {
			e, _ := fakeEnv(t)
			methods := []string{ep.Method}
			if ep.Method == http.MethodGet {
				methods = append(methods, http.MethodHead)
			}
			allow := strings.Join(allowedMethods(ep.Path), ", ")
			for _, m := range methods {
				// The router's own answers; an endpoint may answer 404
				// for what it does not know (unknown_job).
				r := e.sample(ep, m)
				if r.status == http.StatusMethodNotAllowed || r.status == http.StatusNotFound && m != http.MethodHead && r.apiError(t).Code == rpc.CodeNotFound {
					t.Errorf("%s: status %d: %s", m, r.status, r.body)
				}
			}
			for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
				if strings.Contains(allow, m) {
					continue
				}
				r := e.sample(ep, m)
				if r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != allow {
					t.Errorf("%s: status %d, Allow %q; want 405 with Allow %q", m, r.status, r.header.Get("Allow"), allow)
				}
				if m != http.MethodHead {
					wantError(t, r, http.StatusMethodNotAllowed, rpc.CodeMethod)
				}
			}
		})
	}
	e, _ := fakeEnv(t)
	wantError(t, e.get("/v1/no/such/path"), http.StatusNotFound, rpc.CodeNotFound)
}

// Endpoint.Write says which endpoints read the request id header: only
// they refuse a malformed one.
func TestEndpointsWrite(t *testing.T) {
	for _, ep := range rpc.Endpoints {
		t.Run(ep.Method+" "+ep.Path, func(t *testing.T) {
			e, _ := fakeEnv(t)
			r := e.sample(ep, ep.Method, rpc.HeaderRequestID, "not-a-request-id")
			if !ep.Write {
				if r.status != http.StatusOK {
					t.Fatalf("status %d, want 200 (the endpoint is no write and ignores the header): %s", r.status, r.body)
				}
				return
			}
			if msg := wantError(t, r, http.StatusBadRequest, rpc.CodeInvalid).Message; !strings.Contains(msg, rpc.HeaderRequestID) {
				t.Errorf("message %q does not name the header", msg)
			}
		})
	}
}

// Endpoint.Redirects says which endpoints a node that does not lead sends
// to the leader; the rest it answers itself.
func TestEndpointsRedirect(t *testing.T) {
	for _, ep := range rpc.Endpoints {
		t.Run(ep.Method+" "+ep.Path, func(t *testing.T) {
			var fake *fakeBackend
			e := newEnv(t, testConfig(), func(l *localBackend) rpcBackend { fake = newFake(l); return standby{fake} }, nil)
			fake.follower(httpapi.ErrNotLeader, rpc.NodeRef{ID: "n2", APIAddr: "10.0.0.2:8080"}, true)
			r := e.sample(ep, ep.Method, reqID(uuid.New(), 1)...)
			if !ep.Redirects {
				if r.status != http.StatusOK {
					t.Fatalf("status %d, want 200 (a follower answers it): %s", r.status, r.body)
				}
				return
			}
			wantError(t, r, http.StatusTemporaryRedirect, rpc.CodeNotLeader)
			if loc := r.header.Get("Location"); !strings.HasPrefix(loc, "http://10.0.0.2:8080"+e.samplePath(ep)) {
				t.Errorf("Location %q", loc)
			}
		})
	}
}

// The watch's wait parameter documents the server's default and limit.
func TestWatchWaitDoc(t *testing.T) {
	for _, ep := range rpc.Endpoints {
		for _, p := range ep.Query {
			if ep.Path != rpc.PathAllgatherWatch || p.Name != rpc.WatchParamWait {
				continue
			}
			for _, d := range []time.Duration{httpapi.DefaultWatchWait, httpapi.DefaultMaxWatchWait} {
				if s := fmt.Sprintf("%gs", d.Seconds()); !strings.Contains(p.Doc, s) {
					t.Errorf("the doc of %s does not say %s: %q", p.Name, s, p.Doc)
				}
			}
			return
		}
	}
	t.Errorf("%s has no %s parameter", rpc.PathAllgatherWatch, rpc.WatchParamWait)
}
