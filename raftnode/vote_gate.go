package raftnode

import (
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// voteGate wraps the node's Raft transport: a node that is not a voter of
// its latest configuration refuses every RequestVote, PreVote and
// TimeoutNow, before raft sees them. hashicorp/raft itself grants votes
// whatever its own suffrage, and any vote while its configuration is
// empty; so a node whose volume was lost, which comes back empty under a
// new incarnation, would vote, on the strength of a log that lacks what
// its previous incarnation acknowledged. It votes only once a leader has
// made its new incarnation a voter, after it caught up.
type voteGate struct {
	raft.Transport
	mayVote func() bool
	log     hclog.Logger

	rpcs chan raft.RPC
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	mu         sync.Mutex
	lastLogged time.Time
}

var (
	_ raft.WithPreVote = (*voteGate)(nil)
	_ raft.WithClose   = (*voteGate)(nil)
)

// refusalHeader heads a refused vote: the candidate counts the vote under
// the server it asked, whatever the header says.
var refusalHeader = raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax}

// errNotVoter answers a TimeoutNow sent to a node that is not a voter.
var errNotVoter = errors.New("raftmaster: this node is not a voter of its configuration yet")

// newVoteGate wraps inner; mayVote reports whether the node is a voter of
// its latest configuration.
func newVoteGate(inner raft.Transport, mayVote func() bool, log hclog.Logger) *voteGate {
	g := &voteGate{Transport: inner, mayVote: mayVote, log: log, rpcs: make(chan raft.RPC), done: make(chan struct{})}
	g.wg.Add(1)
	go g.forward()
	return g
}

// Consumer returns the RPCs the gate lets through.
func (g *voteGate) Consumer() <-chan raft.RPC { return g.rpcs }

func (g *voteGate) forward() {
	defer g.wg.Done()
	in := g.Transport.Consumer()
	for {
		select {
		case rpc := <-in:
			if g.refused(rpc) {
				continue
			}
			select {
			case g.rpcs <- rpc:
			case <-g.done:
				return
			}
		case <-g.done:
			return
		}
	}
}

// refused answers rpc itself when it asks for a vote or a leadership
// transfer that this node may not give.
func (g *voteGate) refused(rpc raft.RPC) bool {
	switch req := rpc.Command.(type) {
	case *raft.RequestVoteRequest:
		if g.mayVote() {
			return false
		}
		g.logRefusal("RequestVote", req.ID, req.Term)
		rpc.Respond(&raft.RequestVoteResponse{RPCHeader: refusalHeader, Term: req.Term}, nil)
	case *raft.RequestPreVoteRequest:
		if g.mayVote() {
			return false
		}
		g.logRefusal("PreVote", req.ID, req.Term)
		rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: refusalHeader, Term: req.Term}, nil)
	case *raft.TimeoutNowRequest:
		if g.mayVote() {
			return false
		}
		g.logRefusal("TimeoutNow", req.ID, 0)
		rpc.Respond(nil, errNotVoter)
	default:
		return false
	}
	return true
}

// logRefusal logs a refusal, at most every ten seconds.
func (g *voteGate) logRefusal(what string, from []byte, term uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.lastLogged) < 10*time.Second {
		return
	}
	g.lastLogged = time.Now()
	g.log.Info("refusing to vote: this incarnation is not a voter of the configuration yet", "request", what, "from", string(from), "term", term)
}

// RequestPreVote sends a PreVote through the wrapped transport.
func (g *voteGate) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	pv, ok := g.Transport.(raft.WithPreVote)
	if !ok {
		return errors.New("raftmaster: the transport does not support PreVote")
	}
	return pv.RequestPreVote(id, target, args, resp)
}

// Close stops the gate and closes the wrapped transport.
func (g *voteGate) Close() error {
	var err error
	g.once.Do(func() {
		close(g.done)
		g.wg.Wait()
		if c, ok := g.Transport.(raft.WithClose); ok {
			err = c.Close()
		}
	})
	return err
}
