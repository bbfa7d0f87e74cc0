package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/raftnode"
	"github.com/raftmaster/raftmaster/rpc"
)

// backend adapts a raftnode.Node to rpc.Backend, translating errors into
// the wire's terms.
type backend struct{ node *raftnode.Node }

var _ rpc.Backend = backend{}

func (b backend) NodeID() string { return b.node.ID() }
func (b backend) FSM() *fsm.FSM  { return b.node.FSM() }
func (b backend) Ready() bool    { return b.node.Ready() }
func (b backend) wireErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raftnode.ErrNotLeader):
		if _, ok := b.Leader(); !ok {
			return fmt.Errorf("%w: %v", rpc.ErrNoLeader, err)
		}
		return fmt.Errorf("%w: %v", rpc.ErrNotLeader, err)
	case errors.Is(err, raftnode.ErrUnknownOutcome):
		return fmt.Errorf("%w: %v", rpc.ErrUnknownOutcome, err)
	case errors.Is(err, raftnode.ErrNotReady):
		return fmt.Errorf("%w: %v", rpc.ErrNotReady, err)
	case errors.Is(err, raftnode.ErrUnknownServer):
		return rpc.Errorf(rpc.CodeNotFound, "%v", err)
	}
	return err
}

func (b backend) Apply(ctx context.Context, c fsm.Command) (*fsm.Result, error) {
	r, err := b.node.Apply(ctx, c)
	return r, b.wireErr(err)
}

func (b backend) SetDataset(ctx context.Context, req fsm.RequestID, params fsm.DatasetParams, chunks []fsm.Chunk) (*fsm.Result, error) {
	r, err := b.node.SetDataset(ctx, req, params, chunks)
	return r, b.wireErr(err)
}

func (b backend) ReadBarrier(ctx context.Context) error {
	return b.wireErr(b.node.ReadBarrier(ctx))
}

func (b backend) Leader() (rpc.NodeRef, bool) {
	l, ok := b.node.Leader()
	if !ok || l.APIAddr == "" {
		return rpc.NodeRef{ID: l.ID}, false
	}
	return rpc.NodeRef{ID: l.ID, APIAddr: l.APIAddr}, true
}

func (b backend) Status() rpc.StatusResponse {
	st := b.node.Status()
	leader, _ := b.Leader()
	return rpc.StatusResponse{
		NodeID: b.node.ID(), RaftAddr: b.node.RaftAddr(), APIAddr: b.node.APIAddr(),
		State: st.State, Leader: leader, Term: st.Term,
		LastIndex: st.LastIndex, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
		LastContact: formatContact(st.LastContact), Ready: b.node.Ready(), FSM: b.node.FSM().Stats(),
	}
}

func formatContact(d time.Duration) string {
	switch {
	case d < 0:
		return "never"
	case d == 0:
		return "0s"
	}
	return d.Round(time.Millisecond).String()
}

func (b backend) Members(context.Context) ([]rpc.Member, error) {
	servers, err := b.node.Servers()
	if err != nil {
		return nil, b.wireErr(err)
	}
	out := make([]rpc.Member, 0, len(servers))
	for _, s := range servers {
		out = append(out, rpc.Member{ID: s.ID, RaftAddr: s.RaftAddr, APIAddr: s.APIAddr, Suffrage: s.Suffrage, Leader: s.Leader})
	}
	return out, nil
}

func (b backend) Join(ctx context.Context, req rpc.JoinClusterRequest) error {
	if req.ID == "" || req.RaftAddr == "" || req.APIAddr == "" {
		return fmt.Errorf("%w: join needs id, raft_addr and api_addr", fsm.ErrInvalid)
	}
	return b.wireErr(b.node.AddVoter(ctx, req.ID, req.RaftAddr, req.APIAddr))
}

func (b backend) Remove(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: remove needs an id", fsm.ErrInvalid)
	}
	return b.wireErr(b.node.RemoveServer(ctx, id))
}

func (b backend) Transfer(ctx context.Context, id string) error {
	return b.wireErr(b.node.TransferLeadership(ctx, id))
}
