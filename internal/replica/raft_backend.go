package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/raftnode"
	"github.com/raftmaster/raftmaster/rpc"
)

// raftBackend adapts a raftnode.Node to httpapi.Backend, translating errors into
// the wire's terms.
type raftBackend struct{ node *raftnode.Node }

var _ httpapi.Backend = raftBackend{}

func (b raftBackend) NodeID() string { return b.node.ID() }
func (b raftBackend) FSM() *fsm.FSM  { return b.node.FSM() }
func (b raftBackend) Ready() bool    { return b.node.Ready() }
func (b raftBackend) wireErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raftnode.ErrNotLeader):
		if _, ok := b.Leader(); !ok {
			return fmt.Errorf("%w: %v", httpapi.ErrNoLeader, err)
		}
		return fmt.Errorf("%w: %v", httpapi.ErrNotLeader, err)
	case errors.Is(err, raftnode.ErrUnknownOutcome):
		return fmt.Errorf("%w: %v", httpapi.ErrUnknownOutcome, err)
	case errors.Is(err, raftnode.ErrNotReady):
		return fmt.Errorf("%w: %v", httpapi.ErrNotReady, err)
	case errors.Is(err, raftnode.ErrUnknownMember):
		return rpc.Errorf(rpc.CodeNotFound, "%v", err)
	case errors.Is(err, fsm.ErrInvalid):
		return rpc.Errorf(rpc.CodeInvalid, "%v", err)
	}
	return err
}

func (b raftBackend) Apply(ctx context.Context, c fsm.Command) (*fsm.Result, error) {
	r, err := b.node.Apply(ctx, c)
	return r, b.wireErr(err)
}

func (b raftBackend) SetDataset(ctx context.Context, job string, req fsm.RequestID, params fsm.DatasetParams, patterns []string, chunks []fsm.Chunk) (*fsm.Result, error) {
	r, err := b.node.SetDataset(ctx, job, req, params, patterns, chunks)
	return r, b.wireErr(err)
}

func (b raftBackend) ReadBarrier(ctx context.Context) error {
	return b.wireErr(b.node.ReadBarrier(ctx))
}

func (b raftBackend) Leader() (rpc.NodeRef, bool) {
	l, ok := b.node.Leader()
	if !ok || l.APIAddr == "" {
		return rpc.NodeRef{ID: l.ID}, false
	}
	return rpc.NodeRef{ID: l.ID, APIAddr: l.APIAddr}, true
}

func (b raftBackend) Status() rpc.StatusResponse {
	st := b.node.Status()
	leader, _ := b.Leader()
	var conf []rpc.ConfigServer
	for _, s := range b.node.Configuration() {
		conf = append(conf, rpc.ConfigServer{ID: s.ID, RaftAddr: s.RaftAddr, Voter: s.Voter})
	}
	return rpc.StatusResponse{
		Configuration: conf,
		NodeID:        b.node.ID(), Name: b.node.Name(), Voter: b.node.IsVoter(), Registered: b.node.Registered(), RaftAddr: b.node.RaftAddr(), APIAddr: b.node.APIAddr(),
		State: st.State, Leader: leader, Term: st.Term,
		LastIndex: st.LastIndex, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
		LastContact: formatContact(st.LastContact), Ready: b.node.Ready(), Servers: len(conf),
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

func (b raftBackend) Members(context.Context) ([]rpc.Member, error) {
	servers, err := b.node.Members()
	if err != nil {
		return nil, b.wireErr(err)
	}
	out := make([]rpc.Member, 0, len(servers))
	for _, s := range servers {
		out = append(out, rpc.Member{ID: s.ID, Name: s.Name, RaftAddr: s.RaftAddr, APIAddr: s.APIAddr, Suffrage: s.Suffrage, Leader: s.Leader,
			Version: s.Version, Protocol: s.Protocol})
	}
	return out, nil
}

func (b raftBackend) AddMember(ctx context.Context, req rpc.AddMemberRequest) error {
	if req.ID == "" || req.RaftAddr == "" || req.APIAddr == "" {
		return fmt.Errorf("%w: adding a member needs id, raft_addr and api_addr", fsm.ErrInvalid)
	}
	if level := b.node.FSM().Protocol(); max(req.Protocol, fsm.Protocol1) < level {
		return rpc.Errorf(rpc.CodeInvalid, "node %s runs a release of protocol level %d, below the cluster's %d: upgrade it before it becomes a member",
			req.ID, max(req.Protocol, fsm.Protocol1), level)
	}
	reg := fsm.Registration{ID: req.ID, RaftAddr: req.RaftAddr, APIAddr: req.APIAddr, Version: req.Version, Protocol: req.Protocol}
	return b.wireErr(b.node.AddMember(ctx, reg, req.LastIndex))
}

func (b raftBackend) RemoveMember(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: remove needs an id", fsm.ErrInvalid)
	}
	return b.wireErr(b.node.RemoveMember(ctx, id))
}

func (b raftBackend) Transfer(ctx context.Context, id string) error {
	return b.wireErr(b.node.TransferLeadership(ctx, id))
}
