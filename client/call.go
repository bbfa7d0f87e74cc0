package client

import "context"

// Call sends a write to path (one of the rpc.Path* constants) with in as the
// JSON body and decodes the answer into out. It follows redirects and
// retries with the same request id like every other call. It is for
// programs that need fields the typed calls do not return, such as the FSM
// time a command was applied at.
func (c *Client) Call(ctx context.Context, path string, in, out any) error {
	return c.do(ctx, &call{method: "POST", path: path, body: in, write: true, out: out})
}
