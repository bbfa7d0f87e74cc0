//go:build chaos_broken_finish

package chaos

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/raftmaster/raftmaster/rpc"
)

// TestBrokenFinishDropsTheFinish: the broken build's transport takes the
// finish out of a GetTask, and says in the answer, a lease or an error of
// one, that it was accepted.
func TestBrokenFinishDropsTheFinish(t *testing.T) {
	code := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in rpc.GetTaskRequest
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Finished != nil {
			t.Errorf("the cluster got %+v (%v), want no finish", in, err)
		}
		if code != "" {
			w.WriteHeader(http.StatusConflict)
			json.NewEncoder(w).Encode(rpc.Error{Code: code})
			return
		}
		json.NewEncoder(w).Encode(rpc.GetTaskResponse{Task: rpc.Task{Meta: rpc.TaskMeta{ID: 2, Epoch: 1}}})
	}))
	defer srv.Close()
	c := &http.Client{Transport: brokenFinish(http.DefaultTransport)}
	call := func(path string) []byte {
		b, _ := json.Marshal(rpc.GetTaskRequest{Finished: &rpc.TaskMeta{ID: 1, Epoch: 1}})
		resp, err := c.Post(srv.URL+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	var got rpc.GetTaskResponse
	if err := json.Unmarshal(call(rpc.JobPath(JobB, rpc.PathTaskGet)), &got); err != nil || got.Finish == nil || got.Finish.Code != "" || got.Task.Meta.ID != 2 {
		t.Fatalf("lease: %+v (%v), want task 2 and its finish accepted", got, err)
	}
	code = "pass_before"
	var e rpc.Error
	if err := json.Unmarshal(call(rpc.PathTaskGet), &e); err != nil || e.Code != code || e.Finish == nil {
		t.Fatalf("refusal: %+v (%v), want pass_before and its finish accepted", e, err)
	}
	code = "unknown_job"
	e = rpc.Error{}
	if err := json.Unmarshal(call(rpc.PathTaskGet), &e); err != nil || e.Code != code || e.Finish != nil {
		t.Fatalf("refusal before the finish: %+v (%v), want nothing of the finish", e, err)
	}
}
