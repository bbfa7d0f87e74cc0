package raftnode

import (
	"context"
	"errors"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/leader"
)

// watchLeadership drains Raft's leadership notifications promptly (Raft
// blocks on a full NotifyCh) and runs leaderLoop while this node leads.
func (n *Node) watchLeadership() {
	defer n.wg.Done()
	var run *leaderRun
	stopLoop := func() {
		if run != nil {
			run.stop()
			run = nil
		}
		n.leaderReady.Store(false)
		n.clock.Stop()
	}
	defer stopLoop()
	for {
		select {
		case <-n.stop:
			return
		case isLeader := <-n.notify:
			stopLoop()
			if !isLeader {
				n.log.Info("lost leadership")
				continue
			}
			n.log.Info("gained leadership", "term", n.raft.CurrentTerm())
			run = n.startLeaderLoop()
		}
	}
}

// leaderRun is one term's leader loop.
type leaderRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (n *Node) startLeaderLoop() *leaderRun {
	ctx, cancel := context.WithCancel(context.Background())
	run := &leaderRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(run.done)
		n.leaderLoop(ctx)
	}()
	return run
}

func (r *leaderRun) stop() {
	r.cancel()
	<-r.done
}

// leaderLoop takes over as leader, then proposes Tick whenever the FSM's
// earliest deadline has passed on this node's clock.
func (n *Node) leaderLoop(ctx context.Context) {
	if !n.takeOver(ctx) {
		return
	}
	n.leaderReady.Store(true)
	n.log.Info("leader ready")
	leader.Ticker{
		FSM:     n.fsm,
		Now:     n.now,
		Propose: n.propose,
		Logger:  n.log,
		Sync:    clockSync,
	}.Run(ctx)
}

// clockSync bounds how far FSM time may lag the leader's clock while
// something waits on a deadline: a new leader continues FSM time from the
// log, so this is at most what a fail-over adds to a lease.
const clockSync = time.Second

// takeOver runs what a new leader does before it serves: a barrier, so
// that everything committed by earlier terms is applied, then the take-over
// shared with the etcd backend (the term's clock, its registry entry, the
// fail-over grace). It retries until it succeeds or leadership is lost.
func (n *Node) takeOver(ctx context.Context) bool {
	steps := []struct {
		name string
		run  func() error
	}{
		{"barrier", func() error { return mapRaftError(n.raft.Barrier(n.cfg.ApplyTimeout).Error()) }},
		{"take-over", func() error {
			return leader.TakeOver{
				FSM: n.fsm, Clock: &n.clock, Wall: n.cfg.Clock,
				Self:  fsm.Registration{ID: n.cfg.ID, RaftAddr: n.cfg.RaftAdvertise, APIAddr: n.cfg.APIAddr},
				Grace: n.cfg.FailoverGrace, Limits: n.cfg.Limits, Propose: n.propose,
			}.Run(ctx)
		}},
	}
	for _, step := range steps {
		for {
			err := step.run()
			if err == nil {
				break
			}
			if errors.Is(err, fsm.ErrInvalid) {
				// Deterministic: a retry would be refused the same way.
				n.log.Error("leader take-over step refused by the state machine", "step", step.name, "error", err)
				break
			}
			n.log.Warn("leader take-over step failed", "step", step.name, "error", err)
			if !n.IsLeader() || !leader.Sleep(ctx, 200*time.Millisecond) {
				return false
			}
		}
	}
	return true
}
