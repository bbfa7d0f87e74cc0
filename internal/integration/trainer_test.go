package integration

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// passLog collects, per pass, how often each record was delivered.
type passLog struct {
	mu     sync.Mutex
	counts map[int]map[int]int
}

func (l *passLog) add(pass, rec int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[int]map[int]int{}
	}
	if l.counts[pass] == nil {
		l.counts[pass] = map[int]int{}
	}
	l.counts[pass][rec]++
}

// readPasses reads passes 0, 1, ... while more(pass), as the original
// master's client test does: within a pass a client never sees a record
// twice, and it moves on at ErrPassBefore or ErrNoMoreAvailable.
func readPasses(c *client.Client, more func(pass int) bool, log *passLog) error {
	for pass := 0; more(pass); pass++ {
		c.StartGetRecords(pass)
		seen := map[int]bool{}
		for {
			r, err := c.NextRecord()
			if err != nil {
				if errors.Is(err, client.ErrPassBefore) || errors.Is(err, client.ErrNoMoreAvailable) {
					break
				}
				return fmt.Errorf("pass %d: %w", pass, err)
			}
			rec, err := strconv.Atoi(string(r))
			if err != nil {
				return fmt.Errorf("pass %d: bad record %q", pass, r)
			}
			if seen[rec] {
				return fmt.Errorf("pass %d: record %d received twice", pass, rec)
			}
			seen[rec] = true
			log.add(pass, rec)
		}
	}
	return nil
}

// startTrainers runs n trainers through passes [0, passes), each with its
// own client; the returned function waits for them and fails the test on
// the first error.
func startTrainers(t *testing.T, n, passes int, log *passLog, opts ...client.Option) (wait func()) {
	t.Helper()
	return startTrainersWhile(t, n, func(pass int) bool { return pass < passes }, log, opts...)
}

// startTrainersWhile is startTrainers for trainers that read passes while
// more(pass).
func startTrainersWhile(t *testing.T, n int, more func(pass int) bool, log *passLog, opts ...client.Option) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		cl := newClient(t, opts...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- readPasses(cl, more, log)
		}()
	}
	return func() {
		t.Helper()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// startTrainersUntil runs n trainers through passes until stop is called;
// stop lets every trainer finish the pass after the last one delivered so
// far, waits for them (failing the test on any error a trainer call
// returned) and returns how many passes were read in full.
func startTrainersUntil(t *testing.T, n int, log *passLog, opts ...client.Option) (stop func() int) {
	t.Helper()
	var last atomic.Int64
	last.Store(math.MaxInt64)
	wait := startTrainersWhile(t, n, func(pass int) bool { return int64(pass) <= last.Load() }, log, opts...)
	return func() int {
		t.Helper()
		end := log.lastPass() + 1
		last.Store(int64(end))
		wait()
		return end + 1
	}
}

// lastPass is the highest pass any record was delivered in, or -1.
func (l *passLog) lastPass() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	last := -1
	for p := range l.counts {
		last = max(last, p)
	}
	return last
}

// delivered reports how many distinct records pass has delivered so far.
func (l *passLog) delivered(pass int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.counts[pass])
}

// checkPasses asserts that every pass delivered every record exactly once
// across all trainers (no lease expired in these runs).
func checkPasses(t *testing.T, log *passLog, passes, records int, allowRedelivery bool) {
	t.Helper()
	for p := 0; p < passes; p++ {
		got := log.counts[p]
		for r := 0; r < records; r++ {
			switch n := got[r]; {
			case n == 0:
				t.Errorf("pass %d: record %d never delivered", p, r)
			case n > 1 && !allowRedelivery:
				t.Errorf("pass %d: record %d delivered %d times", p, r, n)
			}
		}
	}
}

// TestOriginalClientTestAgainstFollower is the PaddlePaddle master's client
// test, run through a follower: 4 concurrent clients, 10 passes.
func TestOriginalClientTestAgainstFollower(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--chunks-per-task", "1"}})
	glob := writeDataset(t, t.TempDir(), 50, 25, 40)
	f := follower(c)

	setter := newClient(t, client.WithAddr(f.APIAddr))
	if err := setter.SetDataset([]string{glob}); err != nil {
		t.Fatal(err)
	}
	const clients, passes = 4, 10
	var log passLog
	startTrainers(t, clients, passes, &log, client.WithAddr(f.APIAddr), client.WithBuffer(1))()
	checkPasses(t, &log, passes, 50, false)
	st, err := setter.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.FSM.Pass < passes-1 {
		t.Fatalf("cluster is at pass %d, want >= %d", st.FSM.Pass, passes-1)
	}
	c.Converged(30 * time.Second)
}

// TestLeaderKilledMidPass kills the leader with SIGKILL while trainers
// read: they go on through the new leader and every pass completes.
func TestLeaderKilledMidPass(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--chunks-per-task", "1", "--failover-grace", "2s"}})
	glob := writeDataset(t, t.TempDir(), 200, 50, 60)
	setter := newClient(t, client.WithAddrs(c.APIAddrs()...))
	if err := setter.SetDataset([]string{glob}); err != nil {
		t.Fatal(err)
	}
	const trainers, passes = 3, 4
	var log passLog
	wait := startTrainers(t, trainers, passes, &log, client.WithAddrs(c.APIAddrs()...), client.WithBuffer(4))
	// Kill the leader once the first pass is under way.
	c.WaitFor("pass 0 to be under way", time.Minute, func() bool { return log.delivered(0) >= 40 })
	leader := c.Leader()
	t.Logf("killing leader %s", leader.ID)
	c.Kill(leader)
	wait()
	// A record can come twice in a pass only if a lease expired; none did here.
	checkPasses(t, &log, passes, 200, false)
	c.Restart(leader)
	c.WaitReady()
	c.Converged(time.Minute)
}
