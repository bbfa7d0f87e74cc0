package client

import (
	"context"
	"net/http"

	"github.com/raftmaster/raftmaster/rpc"
)

// Sessions lists the cluster's open sessions in id order, read at the
// leader: each one's TTL, how long it lives without another keep-alive,
// its age, the tasks it holds and how many register keys are attached to
// it. A cluster that requires tokens answers it to an operator token only;
// one below protocol level 6 answers unavailable, which is retried while
// the client's retry budget lasts.
func (c *Client) Sessions() (rpc.SessionsResponse, error) {
	return c.SessionsContext(context.Background())
}

// SessionsContext is Sessions bounded by ctx.
func (c *Client) SessionsContext(ctx context.Context) (rpc.SessionsResponse, error) {
	var resp rpc.SessionsResponse
	err := c.do(ctx, &call{method: http.MethodGet, path: rpc.PathSessions, out: &resp})
	return resp, err
}

// CloseSession closes session id: the tasks it holds go back to the
// queue without counting a failure, the register keys attached to it are
// deleted and a save-model lease granted under it is released. It reports
// false when the session had ended already, which changes nothing. A token
// closes its own sessions only (ErrForeignClient), an operator token any.
func (c *Client) CloseSession(id uint64) (bool, error) {
	return c.CloseSessionContext(context.Background(), id)
}

// CloseSessionContext is CloseSession bounded by ctx.
func (c *Client) CloseSessionContext(ctx context.Context, id uint64) (bool, error) {
	var resp rpc.CloseSessionResponse
	err := c.do(ctx, &call{method: http.MethodDelete, path: sessionPath(rpc.PathSession, id), write: true, out: &resp})
	return err == nil && resp.Closed, err
}
