package httpapi_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// Each error of the original reaches the wire with its own code and
// status, and ErrorFromCode turns it back into an error that matches the
// sentinel.
func TestOriginalErrorCodes(t *testing.T) {
	params := fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute, FailureMax: 0}
	cases := []struct {
		name  string
		code  string
		want  error
		setup func(e *env) response
	}{
		{"pass_before", "pass_before", fsm.ErrPassBefore, func(e *env) response {
			e.setDataset(1, params)
			var got rpc.GetTaskResponse
			e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{Pass: 0}, &got)
			e.ok(rpc.PathTaskFinished, rpc.TaskRequest{Meta: got.Task.Meta}, nil)
			return e.post(rpc.PathTaskGet, rpc.GetTaskRequest{Pass: 0})
		}},
		{"pass_after", "pass_after", fsm.ErrPassAfter, func(e *env) response {
			e.setDataset(1, params)
			e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, nil)
			return e.post(rpc.PathTaskGet, rpc.GetTaskRequest{Pass: 3})
		}},
		{"no_more_available", "no_more_available", fsm.ErrNoMoreAvailable, func(e *env) response {
			e.setDataset(1, params)
			e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, nil)
			return e.post(rpc.PathTaskGet, rpc.GetTaskRequest{})
		}},
		{"all_task_failed", "all_task_failed", fsm.ErrAllTaskFailed, func(e *env) response {
			e.setDataset(1, params)
			var got rpc.GetTaskResponse
			e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &got)
			e.ok(rpc.PathTaskFailed, rpc.TaskRequest{Meta: got.Task.Meta}, nil)
			return e.post(rpc.PathTaskGet, rpc.GetTaskRequest{})
		}},
		{"stale_epoch", "stale_epoch", fsm.ErrStaleEpoch, func(e *env) response {
			e.setDataset(1, params)
			var got rpc.GetTaskResponse
			e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &got)
			return e.post(rpc.PathTaskRenew, rpc.TaskRequest{Meta: rpc.TaskMeta{ID: got.Task.Meta.ID, Epoch: got.Task.Meta.Epoch + 1}})
		}},
		{"no_dataset", "no_dataset", fsm.ErrNoDataset, func(e *env) response {
			return e.post(rpc.PathTaskGet, rpc.GetTaskRequest{})
		}},
		{"unknown_task", "unknown_task", fsm.ErrUnknownTask, func(e *env) response {
			e.setDataset(1, params)
			return e.post(rpc.PathTaskFinished, rpc.TaskRequest{Meta: rpc.TaskMeta{ID: 99}})
		}},
		{"group_mismatch", "group_mismatch", fsm.ErrGroupMismatch, func(e *env) response {
			e.join("g", uuid.New(), 2, "a")
			return e.post(rpc.PathAllgatherJoin, map[string]any{"group": "g", "member": uuid.New(), "num_peers": 3, "data": 1})
		}},
		{"closed", "closed", fsm.ErrClosed, func(e *env) response {
			a := uuid.New()
			g := e.join("g", a, 2, "a")
			e.ok(rpc.PathAllgatherLeave, rpc.LeaveRequest{Group: "g", Member: a}, nil)
			return e.get(watchPath("g", a, g, "0s"))
		}},
		{"reconnected", "reconnected", fsm.ErrReconnected, func(e *env) response {
			a := uuid.New()
			g := e.join("g", a, 2, "a")
			e.join("g", a, 2, "a again")
			return e.get(watchPath("g", a, g, "0s"))
		}},
		{"allgather_timeout", "allgather_timeout", fsm.ErrAllGatherTimeoutExceeded, func(e *env) response {
			a := uuid.New()
			var j rpc.JoinResponse
			e.ok(rpc.PathAllgatherJoin, map[string]any{"group": "g", "member": a, "num_peers": 2, "data": 1, "timeout": "1s", "fail_on_timeout": true}, &j)
			e.clock.Advance(time.Hour / 2)
			if _, err := e.local.Apply(e.t.Context(), &fsm.Tick{}); err != nil {
				e.t.Fatal(err)
			}
			return e.get(watchPath("g", a, j.Generation, "0s"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, testConfig(), nil, nil)
			r := tc.setup(e)
			status := rpc.HTTPStatus(tc.code)
			if tc.code == "unknown_task" && status != http.StatusNotFound || tc.code != "unknown_task" && status != http.StatusConflict {
				t.Errorf("HTTPStatus(%q) = %d", tc.code, status)
			}
			body := wantError(t, r, status, tc.code)
			err := rpc.ErrorFromCode(body.Code, body.Message, r.status)
			if want := rpc.Sentinel(body.Code); want == nil || !errors.Is(err, want) || want.Error() != tc.want.Error() {
				t.Errorf("ErrorFromCode(%q) = %v, does not match the wire sentinel of %v", body.Code, err, tc.want)
			}
			if rpc.Retryable(err) {
				t.Errorf("%q is retryable", tc.code)
			}
			if c, ok := fsm.ParseCode(body.Code); !ok || c != fsm.CodeOf(tc.want) {
				t.Errorf("code %q is not fsm.CodeOf(%v)", body.Code, tc.want)
			}
		})
	}
}

// Every outcome of the state machine has a wire code with a sentinel of
// the same text, and the transport's codes have none.
func TestEveryFSMCodeHasAWireSentinel(t *testing.T) {
	for c := fsm.Code(1); ; c++ {
		err := c.Err()
		if c.String() == fmt.Sprintf("code_%d", uint8(c)) {
			break
		}
		s := rpc.Sentinel(c.String())
		if s == nil || s.Error() != err.Error() {
			t.Errorf("fsm code %s (%v): wire sentinel %v", c, err, s)
		}
		// The one outcome that asks for a retry is a 503, as the
		// transport's are.
		if status := rpc.HTTPStatus(c.String()); status >= 500 && (c != fsm.CodeTooManyClients || status != http.StatusServiceUnavailable) {
			t.Errorf("fsm code %s is sent as a server error", c)
		}
	}
	for _, code := range []string{rpc.CodeNotLeader, rpc.CodeNoLeader, rpc.CodeUnknownOutcome, rpc.CodeTooLarge,
		rpc.CodeNotFound, rpc.CodeMethod, rpc.CodeInternal, rpc.CodeUnavailable} {
		if rpc.Sentinel(code) != nil {
			t.Errorf("transport code %s has a sentinel", code)
		}
	}
}
