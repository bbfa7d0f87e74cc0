package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// A write under a client id the cluster does not hold, past sequence 1,
// is answered 409 unknown_client, which is not retryable with the same id,
// and changes nothing; sequence 1 of the same id is a new client.
func TestUnknownClientIsRefused(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	client := uuid.New()
	before := e.state()
	r := e.post(rpc.PathKVCompareAndSet, rpc.KVCompareAndSetRequest{Key: "k", Value: []byte("v")}, reqID(client, 7)...)
	body := wantError(t, r, http.StatusConflict, rpc.CodeUnknownClient)
	if !strings.Contains(body.Message, client.String()+"/7") || !body.AppliedAt.IsZero() {
		t.Errorf("refusal %+v: want the request id named and no applied_at", body)
	}
	err := rpc.ErrorFromCode(body.Code, body.Message, r.status)
	if !errors.Is(err, rpc.ErrUnknownClient) || rpc.Retryable(err) {
		t.Errorf("%v: want ErrUnknownClient, not retryable", err)
	}
	if after := e.state(); after.hash != before.hash {
		t.Errorf("the refusal changed the state")
	}
	var kv rpc.KVCompareAndSetResponse
	e.ok(rpc.PathKVCompareAndSet, rpc.KVCompareAndSetRequest{Key: "k", Value: []byte("v")}, &kv, reqID(client, 1)...)
	if !kv.Swapped {
		t.Errorf("sequence 1 of the client id answered %+v, want swapped", kv)
	}
}

// fullTable is a backend whose de-duplication table has no room: every
// write under a new client id is refused as the FSM refuses it.
type fullTable struct{ *apitest.Local }

func (f fullTable) Apply(ctx context.Context, c fsm.Command) (*fsm.Result, error) {
	if req := c.Hdr().Request; !req.IsZero() {
		return &fsm.Result{Code: fsm.CodeTooManyClients, Message: "request id " + req.Client.String() + "/1: " + fsm.ErrTooManyClients.Error()}, nil
	}
	return f.Local.Apply(ctx, c)
}

// A new client id refused for want of room is answered 503
// too_many_clients with Retry-After, retryable with the same id.
func TestTooManyClientsIsRetryable(t *testing.T) {
	e := newEnv(t, testConfig(), func(l *apitest.Local) httpapi.Backend { return fullTable{l} }, nil)
	r := e.post(rpc.PathTaskGet, rpc.GetTaskRequest{}, reqID(uuid.New(), 1)...)
	body := wantError(t, r, http.StatusServiceUnavailable, rpc.CodeTooManyClients)
	if r.header.Get("Retry-After") == "" {
		t.Errorf("503 too_many_clients without Retry-After")
	}
	err := rpc.ErrorFromCode(body.Code, body.Message, r.status)
	if !errors.Is(err, rpc.ErrTooManyClients) || !rpc.Retryable(err) {
		t.Errorf("%v: want ErrTooManyClients, retryable", err)
	}
}

// The window the wire contract promises clients is the FSM's.
func TestDedupWindowIsTheFSMs(t *testing.T) {
	if rpc.DedupWindow != fsm.DedupWindow || rpc.MaxWriteRetry >= fsm.DedupWindow {
		t.Fatalf("rpc.DedupWindow %v and MaxWriteRetry %v, fsm.DedupWindow %v", rpc.DedupWindow, rpc.MaxWriteRetry, fsm.DedupWindow)
	}
}
