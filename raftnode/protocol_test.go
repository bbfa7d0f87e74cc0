package raftnode

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/raftmaster/raftmaster/fsm"
)

// The leader raises the cluster's protocol level only once every server of
// the configuration applies it: while one server runs an older release,
// every replica stays at the old level (and writes the old snapshot
// version), and the level rises as soon as that server is upgraded.
func TestProtocolRisesOnceEveryServerIsUpgraded(t *testing.T) {
	// Until upgraded is set, every node answers as an old release: so
	// whichever node leads, the others are below its level.
	var upgraded atomic.Bool
	c := newTestClusterWith(t, 3, func(cfg *Config) {
		cfg.PeerLevel = func(context.Context, fsm.Registration) (uint64, error) {
			if upgraded.Load() {
				return fsm.Protocol, nil
			}
			return fsm.Protocol1, nil
		}
	})
	c.apply(&fsm.CreateJob{Header: fsm.Header{Job: "a"}})
	for _, n := range c.nodes {
		waitFor(t, n.ID()+" to apply the job", func() bool { _, ok := n.FSM().Job("a"); return ok })
		if got := n.FSM().Protocol(); got != fsm.Protocol1 {
			t.Fatalf("%s is at level %d while the other servers run level %d", n.ID(), got, fsm.Protocol1)
		}
	}
	leader := c.leader()
	if reg, ok := leader.FSM().Registration(leader.ID()); !ok || reg != leader.registration().AtLevel(fsm.Protocol1) {
		t.Fatalf("at level 1 the leader's registry entry is %+v, %v; want %+v", reg, ok, leader.registration().AtLevel(fsm.Protocol1))
	}
	upgraded.Store(true)
	for _, n := range c.nodes {
		waitFor(t, n.ID()+" at level "+fmt.Sprint(fsm.Protocol), func() bool { return n.FSM().Protocol() == fsm.Protocol })
	}
	// Once the level is raised, the leader registers its release.
	leader = c.leader()
	waitFor(t, "the leader's release in the registry", func() bool {
		reg, _ := leader.FSM().Registration(leader.ID())
		return reg == leader.registration() && reg.Version != "" && reg.Protocol == fsm.Protocol
	})
}
