package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestAcknowledgedWriteSurvivesAWipedVoter: a node whose volume was
// replaced never votes with its old vote, so it cannot help elect a
// leader whose log lacks what its old self acknowledged.
//
// Three nodes. Follower S is down (disk intact). The leader L acknowledges
// a compare-and-set, committed with the other follower F. L crashes (disk
// intact), and F's volume is replaced. S and the empty F start: F must not
// vote for S, whose log lacks the write, so there is no leader, and no read
// answers that the key is absent. When L is back, the write is there, F
// rejoins as a new incarnation, and every node agrees.
func TestAcknowledgedWriteSurvivesAWipedVoter(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	l := c.Leader()
	others := c.Others(l)
	s, f := others[0], others[1]
	oldF, err := proccluster.Status(context.Background(), f.APIAddr)
	if err != nil {
		t.Fatal(err)
	}

	c.Kill(s)
	cl := newClient(t, client.WithAddrs(l.APIAddr))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acked, err := cl.KVCompareAndSet(ctx, "acked", 0, []byte("kept"))
	if err != nil || !acked.Swapped {
		t.Fatalf("compare-and-set with S down: %+v, %v", acked, err)
	}
	t.Logf("acknowledged version %d by %s, committed with %s", acked.Version, l.ID, f.ID)

	c.Kill(l)
	c.Kill(f)
	t.Logf("replacing the volume of %s", f.DataDir)
	if err := os.RemoveAll(f.DataDir); err != nil {
		t.Fatal(err)
	}
	c.Restart(f)
	c.Restart(s)

	// S campaigns again and again, and is never elected: F refuses it.
	campaigns := logCount(t, s, logCampaign)
	c.WaitFor(s.ID+" to lose three elections", 2*time.Minute, func() bool {
		for _, p := range []*proccluster.Proc{s, f} {
			st, err := proccluster.Status(context.Background(), p.APIAddr)
			if err == nil && st.State == "Leader" {
				t.Fatalf("%s leads with the acknowledged write's holder down and the other voter's volume replaced", p.ID)
			}
			if p == f && err == nil && st.Voter {
				t.Fatalf("the new incarnation of %s (%s) is a voter before any leader added it", f.ID, st.NodeID)
			}
		}
		if got := readKey(t, s.APIAddr, "acked"); got == "absent" {
			t.Fatalf("%s answers that the acknowledged key is absent", s.ID)
		}
		return logCount(t, s, logCampaign) >= campaigns+3
	})

	c.Restart(l)
	c.WaitReady()
	got, err := newClient(t, client.WithAddrs(c.APIAddrs()...)).KVGet(ctx, "acked")
	if err != nil || !got.Found || string(got.Value) != "kept" || got.Version != acked.Version {
		t.Fatalf("after the holder's return: %+v, %v; want version %d holding %q", got, err, acked.Version, "kept")
	}
	newF, err := proccluster.Status(context.Background(), f.APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	if newF.NodeID == oldF.NodeID || newF.Name != oldF.Name {
		t.Fatalf("%s came back as server %s (name %s), was %s: want a new incarnation of the same name", f.ID, newF.NodeID, newF.Name, oldF.NodeID)
	}
	c.WaitFor("the new incarnation to be promoted", time.Minute, func() bool {
		m, err := newClient(t, client.WithAddrs(c.APIAddrs()...)).Members()
		if err != nil {
			return false
		}
		var ids []string
		for _, s := range m.Members {
			if s.Suffrage != "Voter" {
				return false
			}
			ids = append(ids, s.ID)
		}
		return len(ids) == 3 && slices.Contains(ids, newF.NodeID) && !slices.Contains(ids, oldF.NodeID)
	})
	c.Converged(time.Minute)
}

// logCampaign is the line hashicorp/raft logs when a node starts a
// campaign (a pre-vote, then a vote).
const logCampaign = "entering candidate state"

// readKey reads key from the node at addr, redirects not followed, with
// a short deadline: "absent" when the node answers that the key does not
// exist, "present" when it does, and "" when it gives no answer.
func readKey(t *testing.T, addr, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+rpc.PathKVGet+"?key="+key, nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	var v rpc.KVGetResponse
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("kv get from %s: %v (%s)", addr, err, b)
	}
	if v.Found {
		return "present"
	}
	return "absent"
}
