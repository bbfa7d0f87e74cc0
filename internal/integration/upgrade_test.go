package integration

import (
	"context"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestRollingUpgradeFromPreviousRelease starts a cluster of the previous
// release's binary, as a deployment does (--join, --bootstrap-expect),
// runs trainers of this release's client through passes, and upgrades the
// nodes one at a time, followers first, each stopped with SIGTERM and
// started on its data with this release. The first comes back under
// another API address, which the cluster, still led by the previous
// release, must record. Leadership then moves to it, and a follower of
// the previous release, stopped while the log moves on past what the
// leader keeps, is restarted and caught up by the new leader's snapshot.
// No trainer call fails, every pass delivers every record exactly once,
// the cluster stays at protocol level 1 while any node runs the previous
// release and reaches this build's level once the last is upgraded, every
// node's registry entry then holds its release, and the replicas converge.
func TestRollingUpgradeFromPreviousRelease(t *testing.T) {
	needsProcesses(t)
	prev := previousSource(t)
	oldBin := prev.build(t, "./cmd/raftmaster", runtime.GOOS, runtime.GOARCH)
	// Frequent snapshots, few entries kept after them: a follower that
	// was down for a few hundred entries is sent a snapshot.
	// The previous release knows no cluster key: its nodes run Raft
	// unauthenticated, and this release's replace them with --insecure.
	c := proccluster.Start(t, proccluster.Options{BootstrapExpect: 3, Hold: true, Uncredentialed: true,
		Args: []string{"--snapshot-threshold", "100", "--snapshot-interval", "500ms", "--trailing-logs", "50"}})
	newBin := c.Bin
	c.Bin = oldBin
	for _, p := range c.Procs {
		c.Launch(p)
	}
	u := &upgrade{t: t, c: c, old: prev.Version}
	u.whole()
	cl := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithClientIndexing(true))
	if _, err := cl.SetDatasetWithParams([]string{writeDataset(t, t.TempDir(), 300, 50, 60)}, client.DatasetParams{ChunksPerTask: 1}); err != nil {
		t.Fatal(err)
	}
	var log passLog
	stop := startTrainersUntil(t, 3, &log, client.WithAddrs(c.APIAddrs()...), client.WithBuffer(4), client.WithRetry(3*time.Minute))
	c.WaitFor("pass 0 to be under way", time.Minute, func() bool { return log.delivered(0) >= 40 })

	c.Bin = newBin
	for i := range c.Procs {
		p := u.nextToUpgrade()
		c.Term(p)
		if i == 0 {
			// Back under another API address: the node registers it with
			// the leader of the previous release.
			p.APIAddr = proccluster.FreePort(t)
			p.Args = append(p.Args, "--http-addr", p.APIAddr)
		}
		c.Restart(p, "--insecure")
		u.upgraded = append(u.upgraded, p)
		u.whole()
		t.Logf("upgraded %s; trainers at pass %d", p.ID, log.lastPass())
		if i == 0 {
			u.snapshotToPrevious(oldBin)
		}
	}
	c.WaitFor("the cluster at this build's protocol level", time.Minute, func() bool {
		for _, p := range c.Procs {
			if st, err := proccluster.Status(context.Background(), p.APIAddr); err != nil || st.ClusterProtocol != fsm.Protocol {
				return false
			}
		}
		return true
	})
	admin := newClient(t, client.WithAddrs(c.APIAddrs()...))
	c.WaitFor("every node registered with its release", time.Minute, func() bool {
		for _, p := range c.Procs {
			st := statusOf(t, p)
			reg, ok := registryEntry(t, admin, st.NodeID)
			if !ok || reg.Version != st.Version || reg.Protocol != fsm.Protocol || reg.APIAddr != p.APIAddr {
				return false
			}
		}
		return true
	})
	passes := stop()
	t.Logf("trainers read %d passes", passes)
	checkPasses(t, &log, passes, 300, false)
	c.Converged(time.Minute)
}

// upgrade follows a rolling upgrade of a cluster of processes.
type upgrade struct {
	t        *testing.T
	c        *proccluster.Cluster
	old      string // the previous release's version
	upgraded []*proccluster.Proc
}

// nextToUpgrade is a node of the previous release, a follower while there
// is one.
func (u *upgrade) nextToUpgrade() *proccluster.Proc {
	u.t.Helper()
	leader := u.c.Leader()
	var next *proccluster.Proc
	for _, p := range u.c.Procs {
		if !slices.Contains(u.upgraded, p) && (next == nil || next == leader) {
			next = p
		}
	}
	return next
}

// snapshotToPrevious makes the first upgraded node the leader, stops a
// follower of the previous release while the log moves on past what the
// leader keeps after its snapshots, and restarts it on the previous
// release: the new leader's snapshot, at protocol level 1, must be one it
// restores.
func (u *upgrade) snapshotToPrevious(oldBin string) {
	u.t.Helper()
	leader := u.upgraded[0]
	admin := newClient(u.t, client.WithAddrs(u.c.APIAddrs()...))
	if err := admin.TransferLeadership(leader.ID); err != nil {
		u.t.Fatal(err)
	}
	u.c.WaitFor(leader.ID+" to lead", time.Minute, func() bool { return u.c.Leader() == leader })
	var old *proccluster.Proc
	for _, p := range u.c.Procs {
		if !slices.Contains(u.upgraded, p) {
			old = p
		}
	}
	stopped := statusOf(u.t, old).LastIndex
	installed := logCount(u.t, old, "Installed remote snapshot")
	u.c.Term(old)
	// The leader must have dropped the entries after the stopped node's
	// last one, so that it can only send a snapshot: wait for its log to
	// say so, however long a loaded machine takes to snapshot.
	u.c.WaitFor("the leader to compact its log past "+old.ID+"'s last entry", 2*time.Minute, func() bool {
		return compactedTo(u.t, leader) > stopped+1
	})
	newBin := u.c.Bin
	u.c.Bin = oldBin
	u.c.Restart(old)
	u.c.Bin = newBin
	u.whole()
	u.c.WaitFor(old.ID+" to install the new leader's snapshot", time.Minute, func() bool {
		return logCount(u.t, old, "Installed remote snapshot") > installed
	})
	u.t.Logf("%s, of the previous release, installed the snapshot of %s, of this one", old.ID, leader.ID)
}

// whole waits until every node is up and ready in a configuration of all
// of them, each runs the release it should, and the leader's registry
// holds every node's API address; it fails the test if a node is past
// protocol level 1 while one runs the previous release.
func (u *upgrade) whole() {
	u.t.Helper()
	cl := newClient(u.t, client.WithAddrs(u.c.APIAddrs()...), client.WithRetry(5*time.Second))
	last := ""
	defer func() {
		if u.t.Failed() {
			u.t.Logf("last seen: %s", last)
		}
	}()
	u.c.WaitFor("the cluster whole", 2*time.Minute, func() bool {
		mixed := len(u.upgraded) < len(u.c.Procs)
		for _, p := range u.c.Procs {
			st, err := proccluster.Status(context.Background(), p.APIAddr)
			if err != nil {
				last = p.ID + ": " + err.Error()
				return false
			}
			if mixed && st.ClusterProtocol > fsm.Protocol1 {
				u.t.Fatalf("%s is at protocol level %d while a node runs the previous release", p.ID, st.ClusterProtocol)
			}
			if (st.Version == u.old) == slices.Contains(u.upgraded, p) || !st.Ready || st.Servers != len(u.c.Procs) {
				last = p.ID + ": " + st.Version + " " + st.State
				return false
			}
		}
		m, err := cl.Members()
		if err != nil {
			last = "members: " + err.Error()
			return false
		}
		for _, p := range u.c.Procs {
			if !slices.ContainsFunc(m.Members, func(m rpc.Member) bool { return m.APIAddr == p.APIAddr && m.Suffrage == "Voter" }) {
				last = "members: " + p.ID + " not registered at " + p.APIAddr
				return false
			}
		}
		return true
	})
}

// compactingLine matches hashicorp/raft's log line of a compaction.
var compactingLine = regexp.MustCompile(`compacting logs: from=\d+ to=(\d+)`)

// compactedTo returns the last index p's log compactions dropped, as its
// log file says; 0 before any.
func compactedTo(t *testing.T, p *proccluster.Proc) uint64 {
	t.Helper()
	b, err := readFile(p.LogPath)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var last uint64
	for _, m := range compactingLine.FindAllStringSubmatch(b, -1) {
		if n, err := strconv.ParseUint(m[1], 10, 64); err == nil {
			last = max(last, n)
		}
	}
	return last
}
