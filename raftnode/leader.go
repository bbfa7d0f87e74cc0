package raftnode

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/leader"
	"github.com/raftmaster/raftmaster/internal/sessions"
	"github.com/raftmaster/raftmaster/internal/version"
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
// earliest deadline has passed on this node's clock, and runs the term's
// session tracker.
func (n *Node) leaderLoop(ctx context.Context) {
	if !n.takeOver(ctx) {
		return
	}
	// The term's session keep-alives, from the state as taken over.
	tracker := sessions.New(sessions.Config{
		FSM: n.fsm, Now: n.now, Propose: n.propose,
		VerifyLeader: func(context.Context) error { return mapRaftError(n.raft.VerifyLeader().Error()) },
		Logger:       n.log.Named("sessions"), Observer: n.cfg.SessionObserver,
	})
	n.sessions.Store(tracker)
	defer n.sessions.CompareAndSwap(tracker, nil)
	n.leaderReady.Store(true)
	n.log.Info("leader ready")
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(2)
	go func() {
		defer wg.Done()
		n.raiseProtocol(ctx)
	}()
	go func() {
		defer wg.Done()
		tracker.Run(ctx)
	}()
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
				Self:  n.registration(),
				Grace: n.cfg.FailoverGrace, Limits: n.cfg.Limits, Logger: n.log, Propose: n.propose,
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

// Sessions returns the session keep-alive table of this node's term while
// it leads and has taken over; false otherwise.
func (n *Node) Sessions() (*sessions.Tracker, bool) {
	if !n.LeaderReady() {
		return nil, false
	}
	t := n.sessions.Load()
	return t, t != nil
}

// registration is this node's registry entry, with its release.
func (n *Node) registration() fsm.Registration {
	return fsm.Registration{ID: n.id, RaftAddr: n.cfg.RaftAdvertise, APIAddr: n.cfg.APIAddr,
		Version: version.String(), Protocol: fsm.Protocol}
}

// Registered reports whether the node is all its cluster should know it
// as: a voter, whose registry entry, as this replica has applied it, holds
// its addresses and, from protocol level 2, its release. Until then the
// node's registration loop, or the leader's take-over, has a change to
// propose.
func (n *Node) Registered() bool {
	cur, ok := n.fsm.Registration(n.id)
	return ok && cur == n.registration().AtLevel(n.fsm.Protocol()) && n.IsVoter()
}

// PeerLevel asks a server of the configuration for the highest protocol
// level its build applies (fsm.Protocol of its release); an older
// release, which does not say, applies fsm.Protocol1. The registration
// is the server's entry of the node registry, with only its ID and Raft
// address when it has not registered yet.
type PeerLevel func(ctx context.Context, server fsm.Registration) (uint64, error)

// protocolCheckInterval is how often a leader below this build's protocol
// level asks the servers whether it can raise it.
const protocolCheckInterval = 2 * time.Second

// raiseProtocol proposes SetProtocol(fsm.Protocol) once every server of
// the Raft configuration, voters and non-voters, applies that level, so
// that the commands, semantics and snapshot version of the level reach no
// replica that cannot read them. It runs while this node leads and the
// cluster is below the level; once the level is raised, the leader
// registers again, with its release, which the registry records from
// then on (the other nodes' registration loops do the same).
func (n *Node) raiseProtocol(ctx context.Context) {
	lastWhy := ""
	for {
		if n.fsm.Protocol() >= fsm.Protocol {
			err := leader.Register(ctx, n.fsm, n.registration(), n.propose)
			if err == nil {
				return
			}
			n.log.Warn("registering this leader with its release", "error", err)
			if !leader.Sleep(ctx, protocolCheckInterval) {
				return
			}
			continue
		}
		why := n.levelBlocker(ctx, fsm.Protocol)
		if why == "" {
			_, err := n.propose(ctx, &fsm.SetProtocol{Level: fsm.Protocol})
			if err == nil {
				n.log.Info("raised the cluster's protocol level: every server runs a release that knows it", "level", fsm.Protocol)
				continue
			}
			why = "proposing it: " + err.Error()
		}
		if why != lastWhy {
			n.log.Info("not raising the cluster's protocol level yet", "level", fsm.Protocol, "at", n.fsm.Protocol(), "why", why)
			lastWhy = why
		}
		if !leader.Sleep(ctx, protocolCheckInterval) {
			return
		}
	}
}

// levelBlocker returns "" when every server of the configuration applies
// level, or says which one does not, or could not be asked.
func (n *Node) levelBlocker(ctx context.Context, level uint64) string {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err.Error()
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == n.id {
			continue
		}
		if n.cfg.PeerLevel == nil {
			return "no way to ask the other servers their level"
		}
		reg, ok := n.fsm.Registration(string(s.ID))
		if !ok {
			reg = fsm.Registration{ID: string(s.ID), RaftAddr: string(s.Address)}
		}
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		got, err := n.cfg.PeerLevel(actx, reg)
		cancel()
		switch {
		case err != nil:
			return fmt.Sprintf("server %s did not say its level: %v", s.ID, err)
		case got < level:
			return fmt.Sprintf("server %s runs a release of level %d", s.ID, got)
		}
	}
	return ""
}
