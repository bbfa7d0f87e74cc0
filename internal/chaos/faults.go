package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/raftmaster/raftmaster/internal/chaos/netfault"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
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
	ClockForward    FaultKind = "clock-jump-ahead"  // a node's clock jumps forward by seconds or hours; it leads
	ClockBack       FaultKind = "clock-jump-behind" // a node's clock jumps back by seconds or hours; it leads
	CrashAll        FaultKind = "crash-all"         // SIGKILL every node at once (a power loss), restart them all
	LoseAnswers     FaultKind = "lose-answers"      // half the answers to applied writes are lost on the way back
	WipeNode        FaultKind = "wipe-node"         // SIGKILL the leader or a follower, replace its volume, restart it empty
	WipeAmidKills   FaultKind = "wipe-amid-kills"   // a volume is replaced while every other node crashes; those behind it restart with it
)

// AllFaults lists every fault kind.
var AllFaults = []FaultKind{
	KillLeader, KillFollower, PauseLeader, PauseFollower, CutLinkOneWay, CutLinkBothWays,
	IsolateLeader, PartitionMajor, RollingRestart, ClockForward, ClockBack, LoseAnswers,
	WipeNode, WipeAmidKills,
}

// extraFaults are kinds that are not in AllFaults. "make chaos-variants"
// injects CrashAll once per run (Config.Once) against the
// chaos_broken_votes build, whose lost terms and votes hardly ever matter
// while nodes restart one at a time: a restarted node relearns the term
// from the others within a heartbeat, and once it holds an entry of that
// term Raft's log comparison already refuses a second vote for a candidate
// that lacks it. A majority restarting together has no one to relearn the
// term from.
var extraFaults = []FaultKind{CrashAll}

// ParseFaults parses a comma-separated list of fault kinds.
func ParseFaults(s string) ([]FaultKind, error) {
	var out []FaultKind
	for _, f := range strings.Split(s, ",") {
		k := FaultKind(strings.TrimSpace(f))
		if !slices.Contains(AllFaults, k) && !slices.Contains(extraFaults, k) {
			return nil, fmt.Errorf("unknown fault kind %q", k)
		}
		out = append(out, k)
	}
	return out, nil
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
	loss  *answerLoss
	vols  *volumes
	logf  func(string, ...any)
	// fatalf fails the run: a fault that could not be injected as
	// described.
	fatalf func(string, ...any)
}

// inject applies a fault and returns a function that heals it. It fails
// only when a wipe has to wait for an earlier one to be promoted, and it
// is not within a minute (see volumes).
func (in *injector) inject(kind FaultKind) (detail string, heal func(), err error) {
	if kind == WipeNode || kind == WipeAmidKills {
		return in.injectWipe(kind)
	}
	detail, heal = in.injectOther(kind)
	return detail, heal, nil
}

// injectOther applies a fault that keeps every volume.
func (in *injector) injectOther(kind FaultKind) (detail string, heal func()) {
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
	case LoseAnswers:
		in.loss.on.Store(true)
		return "half the answers to writes", func() { in.loss.on.Store(false) }
	case CrashAll:
		// One after the other, but SIGKILL takes effect at once: no node
		// runs again before every node is down.
		for _, p := range in.c.Procs {
			if p.Running() {
				in.c.Kill(p)
			}
		}
		return "every node", func() {
			for _, p := range in.c.Procs {
				if !p.Running() {
					in.c.Restart(p)
				}
			}
		}
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
		// Seconds, or hours: a wall clock that is wrong must move no
		// deadline. Half the time the leader's clock jumps while it leads;
		// otherwise a follower's does and leadership moves to it, so that
		// a skewed node takes over.
		off := time.Duration(1+in.rng.IntN(5)) * time.Second
		if in.rng.IntN(2) == 0 {
			off = time.Duration(1+in.rng.IntN(3)) * time.Hour
		}
		if kind == ClockBack {
			off = -off
		}
		target := leader
		if in.rng.IntN(2) == 0 {
			target = follower
		}
		in.setClock(target.ID, off)
		detail := fmt.Sprintf("%s %+v", target.ID, off)
		if target != leader {
			detail += ", leadership moved to it"
			in.transfer(leader, target.ID)
		}
		return detail, func() { in.setClock(target.ID, 0) }
	}
	panic("unknown fault " + string(kind))
}

func (in *injector) setClock(id string, off time.Duration) {
	if err := os.WriteFile(in.clock[id], []byte(off.String()), 0o644); err != nil {
		in.logf("clock file of %s: %v", id, err)
	}
}

// transfer asks the leader to hand leadership to node id. A failure is
// only logged: the fault still skews the node's clock.
func (in *injector) transfer(leader *proccluster.Proc, id string) {
	body, _ := json.Marshal(rpc.TransferRequest{ID: id})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+leader.APIAddr+rpc.PathClusterTransfer, bytes.NewReader(body))
	if err != nil {
		in.logf("transfer to %s: %v", id, err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		in.logf("transfer to %s: %v", id, err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		in.logf("transfer to %s: HTTP %d", id, resp.StatusCode)
	}
}

// clockFile is where node id reads its clock offset.
func clockFile(dir, id string) string { return filepath.Join(dir, id+".clock") }
