package integration

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// TestAllgatherAcrossNodes: 16 members, each talking to a different node,
// all receive the same data in the same order.
func TestAllgatherAcrossNodes(t *testing.T) {
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	const members = 16
	results := make([][]any, members)
	var readies sync.WaitGroup
	var wg sync.WaitGroup
	for i := range members {
		cl := newClient(t, client.WithAddr(c.Procs[i%len(c.Procs)].APIAddr))
		wg.Add(1)
		readies.Add(1)
		go func() {
			defer wg.Done()
			w, err := cl.Join("rendezvous", uuid.New(), members, map[string]any{"rank_hint": i, "host": fmt.Sprintf("10.0.0.%d", i)},
				readies.Done, func(err error) { t.Errorf("member %d: timeout callback: %v", i, err) })
			if err != nil {
				t.Errorf("member %d: join: %v", i, err)
				readies.Done()
				return
			}
			select {
			case res := <-w.C:
				if res.Err != nil {
					t.Errorf("member %d: %v", i, res.Err)
					return
				}
				results[i] = res.Data
			case <-time.After(2 * time.Minute):
				t.Errorf("member %d: no result", i)
			}
		}()
	}
	wg.Wait()
	readies.Wait()
	if t.Failed() {
		return
	}
	for i := 1; i < members; i++ {
		if !reflect.DeepEqual(results[i], results[0]) {
			t.Fatalf("member %d got %v, member 0 got %v", i, results[i], results[0])
		}
	}
	if len(results[0]) != members {
		t.Fatalf("got %d entries, want %d", len(results[0]), members)
	}
	hints := map[float64]bool{}
	for _, d := range results[0] {
		hints[d.(map[string]any)["rank_hint"].(float64)] = true
	}
	if len(hints) != members {
		t.Fatalf("data of %d distinct members, want %d: %v", len(hints), members, results[0])
	}
	c.Converged(30 * time.Second)
}
