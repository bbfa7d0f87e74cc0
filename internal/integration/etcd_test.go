package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/etcdtest"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// TestEtcdBackendFailover runs the etcd-backed parity mode: two real master
// processes against a real etcd, trainers that find the master through
// etcd (WithEtcd), and a SIGKILL of the active master mid-pass. The standby
// takes the lock when the dead master's session expires, loads the saved
// state, and every pass completes with every record delivered; a register
// key written before the kill reads the same after it.
func TestEtcdBackendFailover(t *testing.T) {
	needsProcesses(t)
	e := etcdtest.Start(t)
	c := proccluster.StartEtcd(t, e.Endpoint, 2, "--etcd-prefix", "/jobs/resnet", "--etcd-ttl", "2s", "--chunks-per-task", "1", "--failover-grace", "2s")
	viaEtcd := []client.Option{client.WithEtcd([]string{e.Endpoint}, time.Minute), client.WithEtcdPrefix("/jobs/resnet")}
	active := c.Leader()
	standby := c.Others(active)[0]
	c.WaitReady()

	glob := writeDataset(t, t.TempDir(), 150, 50, 60)
	setter := newClient(t, viaEtcd...)
	if err := setter.SetDataset([]string{glob}); err != nil {
		t.Fatal(err)
	}
	// The standby redirects to the active master.
	if _, err := newClient(t, client.WithAddr(standby.APIAddr)).Status(); err != nil {
		t.Fatalf("status through the standby: %v", err)
	}
	out, err := cli(t, c, "cluster", "inspect", "--addr", standby.APIAddr)
	if err != nil {
		t.Fatalf("cluster inspect: %v", err)
	}
	for _, id := range []string{"m1", "m2"} {
		if !strings.Contains(out, id) {
			t.Fatalf("cluster inspect does not list master %s:\n%s", id, out)
		}
	}

	// Both masters' metrics say who holds the lock; there is no Raft term.
	waitMetrics(t, "the masters' leadership series", time.Minute, func() string {
		for _, p := range []*proccluster.Proc{active, standby} {
			f := scrapeMetrics(t, p.APIAddr)
			has, _ := metricValue(f, "raftmaster_has_leader")
			is, _ := metricValue(f, "raftmaster_is_leader")
			if want := p == active; has != 1 || (is == 1) != want {
				return fmt.Sprintf("%s: has_leader %v, is_leader %v; want 1 and %v", p.ID, has, is, bit(want))
			}
			if _, ok := f["raftmaster_term"]; ok {
				return p.ID + " serves raftmaster_term, which the etcd backend has not"
			}
		}
		return ""
	})

	// The register's routes are served through the standby too, and its
	// keys are part of the saved state.
	rdzv, err := newClient(t, client.WithAddr(standby.APIAddr)).KVCompareAndSet(context.Background(), "rdzv", 0, []byte("round-1"))
	if err != nil || !rdzv.Swapped {
		t.Fatalf("compare-and-set through the standby: %+v, %v", rdzv, err)
	}

	const trainers, passes = 3, 3
	var log passLog
	wait := startTrainers(t, trainers, passes, &log, append(viaEtcd, client.WithBuffer(4))...)
	c.WaitFor("pass 0 to be under way", time.Minute, func() bool { return log.delivered(0) >= 30 })
	t.Logf("killing active master %s", active.ID)
	c.Kill(active)
	wait()
	// Every acknowledged change was saved before it was answered, and the
	// new master's grace keeps the dead one's leases alive: no record is
	// lost and none comes twice.
	checkPasses(t, &log, passes, 150, false)
	if got := c.Leader(); got != standby {
		t.Fatalf("active master is %s, want the standby %s", got.ID, standby.ID)
	}
	st, err := setter.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.FSM.Pass < passes-1 {
		t.Fatalf("master is at pass %d, want >= %d", st.FSM.Pass, passes-1)
	}
	if v, err := setter.KVGet(context.Background(), "rdzv"); err != nil || v.Version != rdzv.Version || string(v.Value) != "round-1" {
		t.Fatalf("the register after the fail-over: %+v, %v; want version %d", v, err, rdzv.Version)
	}
}

// bit is 1 for true and 0 for false.
func bit(b bool) int {
	if b {
		return 1
	}
	return 0
}
