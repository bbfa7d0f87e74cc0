package chaos

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// wipeWait bounds the wait of a wipe for earlier wipes to be promoted.
const wipeWait = time.Minute

// incarnation is one incarnation of a node, as the run knows it: where its
// lines start in the node's log file, which every incarnation appends to,
// and its server id once known.
type incarnation struct {
	logFrom int64
	id      string
}

// volumes keeps track of the nodes whose volume the run replaced.
//
// WipeNode and WipeAmidKills replace a node's volume: SIGKILL, its data
// directory deleted, and a restart on an empty one. The node comes back as
// a new incarnation under a new server id, which the leader adds as a
// non-voter and promotes once it has caught up (docs/operations.md,
// "Losing volumes"). From its wipe until that promotion the node holds none of
// what it acknowledged: it is lacking. It counts as lacking until its
// status answers voter: true under a server id other than the one it had
// before the wipe.
//
// The rule: a wipe goes ahead only if, counting its target, at most a
// minority of the nodes are lacking: (N-1)/2, one of three, two of five.
// Wiping a node that is already lacking counts it once.
//
// Only lacking nodes count, not nodes that are down, because a node that
// is killed, paused or cut off keeps its volume. While such a fault lasts
// it is out of the quorum, and the cluster may rightly stall (with one
// node of three lacking, a killed leader leaves one intact voter; a
// WipeAmidKills stalls it on purpose), but every fault is healed before
// its progress check, so every node is running again by then. What the
// cluster then needs to go on is a majority of voters that hold their
// data, N - lacking >= N/2+1, which is the rule. A lacking node does not
// come back by being restarted: it needs a leader to promote it, and the
// leader needs that majority. With two of three volumes lost the cluster
// stops for good, as it must, and the progress check would report a
// correct cluster. So faults that take an intact node away while another
// is lacking go ahead; a wipe that would break the rule waits, with every
// earlier fault healed, for the promotions it needs. A promotion that has
// not come within a minute of that wait is a violation: the empty node
// rejoins by itself.
type volumes struct {
	c    *proccluster.Cluster
	logf func(string, ...any)
	ctx  context.Context // ends with the run
	wg   sync.WaitGroup

	mu sync.Mutex
	// lacking maps the name of every node wiped and not yet promoted to
	// its index in incs.
	lacking map[string]int
	// incs lists, per node name, its incarnations since the first wipe.
	incs map[string][]incarnation
}

func newVolumes(ctx context.Context, c *proccluster.Cluster, logf func(string, ...any)) *volumes {
	return &volumes{c: c, logf: logf, ctx: ctx, lacking: map[string]int{}, incs: map[string][]incarnation{}}
}

// mayWipe reports whether wiping node name keeps the lacking nodes a
// minority.
func (v *volumes) mayWipe(name string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := len(v.lacking)
	if _, ok := v.lacking[name]; !ok {
		n++
	}
	return n <= (len(v.c.Procs)-1)/2
}

// lackingNames lists the lacking nodes, sorted.
func (v *volumes) lackingNames() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for name := range v.lacking {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// pick waits up to wait until the node that choose returns may be wiped,
// and returns it. choose is asked again until then, since the leader may
// move meanwhile.
func (v *volumes) pick(choose func() *proccluster.Proc, wait time.Duration) (*proccluster.Proc, error) {
	start := time.Now()
	deadline := start.Add(wait)
	for waited := false; ; waited = true {
		p := choose()
		if v.mayWipe(p.ID) {
			if waited {
				v.logf("wiping %s waited %v for promotions", p.ID, time.Since(start).Round(time.Millisecond))
			}
			return p, nil
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("wiping %s had to wait for the new incarnation of %s to be promoted, and it was not within %v with every fault healed",
				p.ID, strings.Join(v.lackingNames(), ", "), wait)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// whoIs asks node p for its server id and whether it leads: "" and
// "follower" when it does not answer.
func whoIs(p *proccluster.Proc) (id, role string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := proccluster.Status(ctx, p.APIAddr)
	if err != nil {
		return "", "follower"
	}
	if st.State == "Leader" {
		return st.NodeID, "leader"
	}
	return st.NodeID, "follower"
}

// wipe replaces the volume of p, which was killed; oldID is the server id
// it had. It returns the index of the new incarnation, for restarted.
func (v *volumes) wipe(p *proccluster.Proc, oldID string) (int, error) {
	var logFrom int64
	if fi, err := os.Stat(p.LogPath); err == nil {
		logFrom = fi.Size()
	}
	if err := os.RemoveAll(p.DataDir); err != nil {
		return 0, fmt.Errorf("replacing the volume of %s: %w", p.ID, err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	incs := v.incs[p.ID]
	if len(incs) == 0 {
		incs = []incarnation{{}}
	}
	if last := &incs[len(incs)-1]; last.id == "" {
		last.id = oldID
	}
	incs = append(incs, incarnation{logFrom: logFrom})
	v.incs[p.ID] = incs
	v.lacking[p.ID] = len(incs) - 1
	return len(incs) - 1, nil
}

// restarted watches the incarnation inc of node p, restarted on an empty
// volume, until it is promoted, it is wiped again, or the run ends.
func (v *volumes) restarted(p *proccluster.Proc, inc int, oldID string, at time.Time) {
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		for {
			select {
			case <-v.ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			v.mu.Lock()
			superseded := len(v.incs[p.ID])-1 != inc
			v.mu.Unlock()
			if superseded {
				return
			}
			ctx, cancel := context.WithTimeout(v.ctx, 2*time.Second)
			st, err := proccluster.Status(ctx, p.APIAddr)
			cancel()
			if err != nil || !promotedIncarnation(st, oldID) {
				continue
			}
			v.mu.Lock()
			if len(v.incs[p.ID])-1 == inc {
				v.incs[p.ID][inc].id = st.NodeID
				delete(v.lacking, p.ID)
			}
			v.mu.Unlock()
			v.logf("%s: new incarnation %s promoted %v after its restart", p.ID, st.NodeID, time.Since(at).Round(time.Millisecond))
			return
		}
	}()
}

// promotedIncarnation reports whether a node's status shows an
// incarnation other than oldID that is a voter of its configuration.
func promotedIncarnation(st rpc.StatusResponse, oldID string) bool {
	return st.Voter && st.NodeID != "" && st.NodeID != oldID
}

// incarnations returns the incarnations of node name, or none if it was
// never wiped.
func (v *volumes) incarnations(name string) []incarnation {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.incs[name])
}

// settled waits until the membership is what it was before any wipe, one
// voter per node: every node answers as a voter, and the leader's
// configuration lists exactly their server ids and its node registry as
// many nodes, every old incarnation removed from both. It describes what is amiss if that does not happen within
// timeout.
func settled(c *proccluster.Cluster, timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	for {
		amiss := membershipAmiss(c)
		if amiss == "" {
			return ""
		}
		if !time.Now().Before(deadline) {
			return fmt.Sprintf("the membership did not settle %v after the faults were healed: %s", timeout, amiss)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// membershipAmiss describes how the membership differs from one voter per
// node, or returns "".
func membershipAmiss(c *proccluster.Cluster) string {
	var ids, amiss []string
	var leader *rpc.StatusResponse
	for _, p := range c.Procs {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		st, err := proccluster.Status(ctx, p.APIAddr)
		cancel()
		switch {
		case err != nil:
			return fmt.Sprintf("%s: %v", p.ID, err)
		case !st.Voter:
			amiss = append(amiss, fmt.Sprintf("%s (%s) is not a voter", p.ID, st.NodeID))
		}
		ids = append(ids, st.NodeID)
		if st.State == "Leader" {
			leader = &st
		}
	}
	if leader == nil {
		return "no node leads"
	}
	var conf []string
	for _, s := range leader.Configuration {
		if !s.Voter {
			amiss = append(amiss, s.ID+" is a non-voter of the leader's configuration")
		}
		conf = append(conf, s.ID)
	}
	slices.Sort(ids)
	slices.Sort(conf)
	if !slices.Equal(ids, conf) {
		amiss = append(amiss, fmt.Sprintf("the leader's configuration lists %v, the nodes are %v", conf, ids))
	}
	if leader.FSM.Nodes != len(c.Procs) {
		amiss = append(amiss, fmt.Sprintf("the node registry holds %d nodes, not %d", leader.FSM.Nodes, len(c.Procs)))
	}
	return strings.Join(amiss, "; ")
}

// injectWipe replaces a node's volume, alone (WipeNode) or while every
// other node crashes (WipeAmidKills).
func (in *injector) injectWipe(kind FaultKind) (detail string, heal func(), err error) {
	// Every draw first, so that the schedule does not depend on how long
	// the wipe waits.
	leaderTarget, at := in.rng.IntN(2) == 0, in.rng.IntN(1<<30)
	perm := in.rng.Perm(len(in.c.Procs) - 1)
	phase := time.Duration(500+in.rng.IntN(1500)) * time.Millisecond
	var target *proccluster.Proc
	if kind == WipeNode {
		target, err = in.vols.pick(func() *proccluster.Proc {
			leader := in.c.Leader()
			if leaderTarget {
				return leader
			}
			others := in.c.Others(leader)
			return others[at%len(others)]
		}, wipeWait)
	} else {
		target, err = in.vols.pick(func() *proccluster.Proc { return in.c.Procs[at%len(in.c.Procs)] }, wipeWait)
	}
	if err != nil {
		return "", nil, err
	}
	oldID, role := whoIs(target)
	if kind == WipeNode {
		in.c.Kill(target)
		inc := in.wipeVolume(target, oldID)
		return fmt.Sprintf("%s (%s, %s)", target.ID, role, oldID), func() { in.restartWiped(target, inc, oldID) }, nil
	}

	// WipeAmidKills: the way a lost volume loses acknowledged writes when
	// an empty node may vote. A minority of the other nodes (lagging) is
	// killed first and misses the writes the others commit; then the
	// target and every node that holds those writes crash, and the target
	// comes back empty together with the lagging nodes: a majority in
	// number, which can elect a leader only if the empty node votes, and
	// that leader would lack the writes. The nodes holding them restart
	// when the fault is healed.
	var others []*proccluster.Proc
	for _, p := range in.c.Procs {
		if p != target {
			others = append(others, p)
		}
	}
	minority := (len(in.c.Procs) - 1) / 2
	var lagging, holders []*proccluster.Proc
	for i, j := range perm {
		if i < minority {
			lagging = append(lagging, others[j])
		} else {
			holders = append(holders, others[j])
		}
	}
	for _, p := range lagging {
		in.c.Kill(p)
	}
	sleep(context.Background(), phase)
	in.c.Kill(target)
	for _, p := range holders {
		in.c.Kill(p)
	}
	inc := in.wipeVolume(target, oldID)
	restartedAt := time.Now()
	for _, p := range lagging {
		in.c.Restart(p)
	}
	in.c.Restart(target)
	in.vols.restarted(target, inc, oldID, restartedAt)
	detail = fmt.Sprintf("%s (%s, %s), with %v killed %v before it and %v with it", target.ID, role, oldID, ids(lagging), phase, ids(holders))
	return detail, func() {
		for _, p := range holders {
			in.c.Restart(p)
		}
	}, nil
}

// wipeVolume replaces the volume of target, which was killed.
func (in *injector) wipeVolume(target *proccluster.Proc, oldID string) int {
	inc, err := in.vols.wipe(target, oldID)
	if err != nil {
		in.fatalf("%v", err)
	}
	return inc
}

// restartWiped restarts target on its empty volume and watches for its
// promotion.
func (in *injector) restartWiped(target *proccluster.Proc, inc int, oldID string) {
	in.c.Restart(target)
	in.vols.restarted(target, inc, oldID, time.Now())
}

// ids lists the names of procs.
func ids(procs []*proccluster.Proc) []string {
	out := make([]string, len(procs))
	for i, p := range procs {
		out[i] = p.ID
	}
	return out
}
