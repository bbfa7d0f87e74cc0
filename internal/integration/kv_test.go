package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
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
