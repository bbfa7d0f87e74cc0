package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/raftmaster/raftmaster/internal/chaos/netfault"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// FaultKind names a fault.
type FaultKind string

// The faults a schedule draws from.
const (
	KillLeader      FaultKind = "kill-leader"       // SIGKILL, restart on the same data dir
	KillFollower    FaultKind = "kill-follower"     // SIGKILL, restart
	PauseLeader     FaultKind = "pause-leader"      // SIGSTOP, SIGCONT
	PauseFollower   FaultKind = "pause-follower"    // SIGSTOP, SIGCONT
	CutLinkOneWay   FaultKind = "cut-link-one-way"  // leader -> one follower only
	CutLinkBothWays FaultKind = "cut-link-both"     // leader <-> one follower
	IsolateLeader   FaultKind = "isolate-leader"    // minority partition holding the leader
	PartitionMajor  FaultKind = "partition-major"   // followers split from each other, the leader keeps a majority
	RollingRestart  FaultKind = "rolling-restart"   // SIGTERM and restart each node in turn
	ClockForward    FaultKind = "clock-jump-ahead"  // the leader's clock jumps forward
	ClockBack       FaultKind = "clock-jump-behind" // the leader's clock jumps back
)

// AllFaults lists every fault kind.
var AllFaults = []FaultKind{
	KillLeader, KillFollower, PauseLeader, PauseFollower, CutLinkOneWay, CutLinkBothWays,
	IsolateLeader, PartitionMajor, RollingRestart, ClockForward, ClockBack,
}

// FaultRecord is one injected fault.
type FaultRecord struct {
	Kind   FaultKind `json:"kind"`
	Detail string    `json:"detail"`
	Start  int64     `json:"start"` // ns since the run started
	End    int64     `json:"end"`   // when it was healed
}

// injector applies and heals faults on a cluster.
type injector struct {
	c     *proccluster.Cluster
	net   *netfault.Net
	rng   *rand.Rand
	clock map[string]string // node id -> clock offset file
	logf  func(string, ...any)
}

// inject applies a fault and returns a function that heals it.
func (in *injector) inject(kind FaultKind) (detail string, heal func()) {
	leader := in.c.Leader()
	others := in.c.Others(leader)
	follower := others[in.rng.IntN(len(others))]
	target := leader // the node a kill or a pause hits
	if kind == KillFollower || kind == PauseFollower {
		target = follower
	}
	switch kind {
	case KillLeader, KillFollower:
		in.c.Kill(target)
		return target.ID, func() { in.c.Restart(target) }
	case PauseLeader, PauseFollower:
		in.c.Pause(target)
		return target.ID, func() { in.c.Resume(target) }
	case CutLinkOneWay:
		in.net.Cut(leader.ID, follower.ID)
		return leader.ID + "->" + follower.ID, in.net.Heal
	case CutLinkBothWays:
		in.net.CutBoth(leader.ID, follower.ID)
		return leader.ID + "<->" + follower.ID, in.net.Heal
	case IsolateLeader:
		var rest []string
		for _, p := range others {
			rest = append(rest, p.ID)
		}
		in.net.Partition([]string{leader.ID}, rest)
		return fmt.Sprintf("[%s] | %v", leader.ID, rest), in.net.Heal
	case PartitionMajor:
		// The leader keeps a majority: it and half the followers on one
		// side, the other followers on the other.
		side := []string{leader.ID}
		var minority []string
		for i, p := range others {
			if i < len(others)/2 {
				side = append(side, p.ID)
			} else {
				minority = append(minority, p.ID)
			}
		}
		in.net.Partition(side, minority)
		return fmt.Sprintf("%v | %v", side, minority), in.net.Heal
	case RollingRestart:
		for _, p := range in.c.Procs {
			if !p.Running() {
				continue
			}
			in.c.Term(p)
			in.c.Restart(p)
			in.c.WaitReady()
		}
		return "every node", func() {}
	case ClockForward, ClockBack:
		off := time.Duration(1+in.rng.IntN(5)) * time.Second
		if kind == ClockBack {
			off = -off
		}
		in.setClock(leader.ID, off)
		return fmt.Sprintf("%s %+v", leader.ID, off), func() { in.setClock(leader.ID, 0) }
	}
	panic("unknown fault " + string(kind))
}

func (in *injector) setClock(id string, off time.Duration) {
	if err := os.WriteFile(in.clock[id], []byte(off.String()), 0o644); err != nil {
		in.logf("clock file of %s: %v", id, err)
	}
}

// clockFile is where node id reads its clock offset.
func clockFile(dir, id string) string { return filepath.Join(dir, id+".clock") }
