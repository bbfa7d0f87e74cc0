package client

import (
	"context"

	"github.com/raftmaster/raftmaster/rpc"
)

// Call sends a write to path (one of the rpc.Path* constants) with in as the
// JSON body and decodes the answer into out. It follows redirects and
// retries with the same request id like every other call. It is for
// programs that need fields the typed calls do not return, such as the FSM
// time a command was applied at.
func (c *Client) Call(ctx context.Context, path string, in, out any) error {
	return c.do(ctx, &call{method: "POST", path: path, body: in, write: true, out: out})
}

// CallSession is Call for a write that goes under the Client's session,
// as the task calls and RequestSaveModel do: the session opens first if
// the Client has none. A write that asks for a grant (rpc.PathTaskGet,
// rpc.PathSaveModel) whose session had ended before its first attempt
// goes again, at once, under a new session; any other write so refused
// fails with ErrSessionExpired, nothing applied. It returns the session
// the write went under in the end, 0 for none (WithoutSession, or a
// cluster below the protocol level of sessions). ErrSessionExpired after
// a retry means that the write may have applied before the session ended,
// never after.
func (c *Client) CallSession(ctx context.Context, path string, in, out any) (uint64, error) {
	cl := &call{method: "POST", path: path, body: in, write: true, out: out, underSession: true,
		grants: path == rpc.PathTaskGet || path == rpc.PathSaveModel}
	err := c.do(ctx, cl)
	return cl.session, err
}
