package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestKVRaceAcrossLeaderKill: two trainers' clients race compare-and-sets
// on one key of a job's register, round after round, each naming the
// version both read; in every round exactly one wins, and the loser is
// told the winner's value and version. The leader is SIGKILLed midway,
// while the rounds go on (a write whose answer was lost is retried with
// its request id): no round gets two winners or none, and the register
// holds the last winner's value, which the CLI reads too.
func TestKVRaceAcrossLeaderKill(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	const job, key, rounds, killAt = "torch-rdzv", "rdzv/state", 40, 15
	ctx := context.Background()
	racers := []*client.Client{
		newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithJob(job)),
		newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithJob(job)),
	}

	var version uint64 // both racers name it in a round
	var last string    // the value of the last winner
	for round := range rounds {
		var leader *proccluster.Proc
		if round == killAt {
			leader = c.Leader()
		}
		results := make([]client.KVResult, len(racers))
		errs := make([]error, len(racers))
		var wg sync.WaitGroup
		for i, r := range racers {
			wg.Go(func() {
				results[i], errs[i] = r.KVCompareAndSet(ctx, key, version, fmt.Appendf(nil, "round %d by racer %d", round, i))
			})
		}
		if leader != nil {
			c.Kill(leader) // while the round's writes are in flight
			t.Logf("round %d: killed the leader %s", round, leader.ID)
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: racer %d: %v", round, i, err)
			}
		}
		var winners []int
		for i, res := range results {
			if res.Swapped {
				winners = append(winners, i)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d at version %d: winners %v, want exactly one: %+v", round, version, winners, results)
		}
		won, lost := results[winners[0]], results[1-winners[0]]
		want := fmt.Sprintf("round %d by racer %d", round, winners[0])
		if won.Version <= version || string(won.Value) != want {
			t.Fatalf("round %d: the winner's answer %+v, want %q above version %d", round, won, want, version)
		}
		if !lost.Found || lost.Version != won.Version || string(lost.Value) != want {
			t.Fatalf("round %d: the loser was told %+v, not the winner's %q at %d", round, lost, want, won.Version)
		}
		version, last = won.Version, want
	}

	// A linearizable read sees the last winner, whichever racer asks.
	for i, r := range racers {
		v, err := r.KVGet(ctx, key)
		if err != nil || !v.Found || v.Version != version || string(v.Value) != last {
			t.Fatalf("racer %d reads %+v, %v; want %q at version %d", i, v, err, last, version)
		}
	}
	out, err := cli(t, c, "kv", "get", "--addr", strings.Join(c.APIAddrs(), ","), "--job", job, "--json", key)
	var got struct {
		Found   bool   `json:"found"`
		Value   []byte `json:"value"`
		Version uint64 `json:"version"`
	}
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || !got.Found || got.Version != version || string(got.Value) != last {
		t.Fatalf("raftmaster kv get: %q, %v", out, err)
	}
	c.Converged(2 * time.Minute)
}

// waitProtocol5 waits until every running node has applied protocol level
// 5, from which the register deletes keys.
func waitProtocol5(t *testing.T, c *proccluster.Cluster) {
	t.Helper()
	waitProtocol(t, c, fsm.Protocol5)
}

// postKVDelete sends one attempt of a delete to addr under the request id
// client/seq, and decodes the answer.
func postKVDelete(t *testing.T, addr, job string, id uuid.UUID, seq uint64, key string) rpc.KVDeleteResponse {
	t.Helper()
	body, _ := json.Marshal(rpc.KVDeleteRequest{Key: key})
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+rpc.JobPath(job, rpc.PathKVDelete), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(rpc.HeaderRequestID, fmt.Sprintf("%s/%d", id, seq))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("delete at %s: %v", addr, err)
	}
	defer resp.Body.Close()
	var out rpc.KVDeleteResponse
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		t.Fatalf("delete at %s: status %d", addr, resp.StatusCode)
	}
	return out
}

// TestKVDeleteAcrossLeaderKill: deletes are replicated state. A delete
// and a prefix delete in flight while the leader is SIGKILLed complete on
// the next leader, which, like every node, holds the keys deleted and
// nothing they held: a compare-and-set fenced by a deleted version swaps
// nothing. A delete sent again under its request id to the next leader,
// after the key was created again, answers its first outcome and deletes
// nothing: the retry is applied once.
func TestKVDeleteAcrossLeaderKill(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	waitProtocol5(t, c)
	const job = "elastic-run"
	ctx := context.Background()
	cl := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithJob(job))
	var pairs []client.KVPair
	for r := range 3 {
		for _, name := range []string{"MASTER_ADDR", "role_info0", "role_info1"} {
			pairs = append(pairs, client.KVPair{Key: fmt.Sprintf("store/round.%d/%s", r, name), Value: []byte(name)})
		}
	}
	if _, err := cl.KVMultiSet(ctx, pairs); err != nil {
		t.Fatal(err)
	}
	state, err := cl.KVCompareAndSet(ctx, "state", 0, []byte("round 2"))
	if err != nil {
		t.Fatal(err)
	}

	// A delete answered by the leader, under a request id of our own.
	id := uuid.New()
	leader := c.Leader()
	first := postKVDelete(t, leader.APIAddr, job, id, 1, "state")
	if !first.Deleted || first.Version != state.Version {
		t.Fatalf("delete: %+v", first)
	}
	again, err := cl.KVCompareAndSet(ctx, "state", 0, []byte("created again"))
	if err != nil || !again.Swapped {
		t.Fatalf("created again: %+v, %v", again, err)
	}

	// The leader dies while a prefix delete and a delete are in flight.
	var wg sync.WaitGroup
	var deleted int
	var res client.KVDeleteResult
	var errs [2]error
	wg.Go(func() { deleted, errs[0] = cl.KVDeletePrefix(ctx, "store/round.0/") })
	wg.Go(func() { res, errs[1] = cl.KVDelete(ctx, "store/round.1/MASTER_ADDR", 0) })
	c.Kill(leader)
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || deleted != 3 || !res.Deleted {
		t.Fatalf("across the kill: prefix delete %d, %v; delete %+v, %v", deleted, errs[0], res, errs[1])
	}
	next := c.Leader()
	if next == leader {
		t.Fatal("no new leader")
	}

	// The first delete, sent again to the next leader: its first outcome,
	// and the key created since stays.
	retry := postKVDelete(t, next.APIAddr, job, id, 1, "state")
	if !retry.Deleted || retry.Version != state.Version || !retry.AppliedAt.Equal(first.AppliedAt) {
		t.Fatalf("retried delete %+v, want the first outcome %+v", retry, first)
	}
	if v, err := cl.KVGet(ctx, "state"); err != nil || v.Version != again.Version {
		t.Fatalf("the retried delete deleted the key created again: %+v, %v", v, err)
	}
	// A compare-and-set fenced by the deleted version brings nothing back.
	if r, err := cl.KVCompareAndSet(ctx, "store/round.1/MASTER_ADDR", res.Version, []byte("back")); err != nil || r.Swapped || r.Found {
		t.Fatalf("compare-and-set of a deleted version: %+v, %v", r, err)
	}
	if n, err := cl.KVNumKeys(ctx, "store/"); err != nil || n != 5 {
		t.Fatalf("%d keys under store/, %v; want 5", n, err)
	}
	out, err := cli(t, c, "kv", "delete", "--addr", strings.Join(c.APIAddrs(), ","), "--job", job, "--prefix", "store/")
	if err != nil || out != "deleted 5 keys under store/\n" {
		t.Fatalf("raftmaster kv delete --prefix: %q, %v", out, err)
	}
	if n, err := cl.KVNumKeys(ctx, ""); err != nil || n != 1 {
		t.Fatalf("%d keys left, %v; want the state alone", n, err)
	}
	c.Converged(2 * time.Minute)
}
