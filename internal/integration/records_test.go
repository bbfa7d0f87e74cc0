package integration

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/recordio"
)

// recordCounts counts deliveries per record.
type recordCounts struct {
	mu sync.Mutex
	n  map[int]int
}

func (c *recordCounts) add(rec int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[int]int{}
	}
	c.n[rec]++
}

func (c *recordCounts) get(rec int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[rec]
}

// checkOnce checks that each of the records 0..records-1 was delivered
// once, or never if it is in lost.
func checkOnce(t *testing.T, counts *recordCounts, records int, lost map[int]bool) {
	t.Helper()
	bad := map[int]int{} // record -> deliveries
	for r := range records {
		want := 1
		if lost[r] {
			want = 0
		}
		if n := counts.get(r); n != want {
			bad[r] = n
		}
	}
	if len(bad) > 0 {
		t.Errorf("pass 0: %d records delivered a wrong number of times (record: times): %v; want once each, never for the %d records of a corrupt task",
			len(bad), bad, len(lost))
	}
}

// taskRecords reads the records of a task's chunks.
func taskRecords(t *testing.T, task client.Task) []int {
	t.Helper()
	var out []int
	for _, ch := range task.Chunks {
		recs, err := recordio.ReadChunk(ch.Path, ch.Offset, int(ch.Records))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			n, err := strconv.Atoi(string(r))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
	}
	return out
}

// TestDeadTrainerTaskComesBack: trainer C leases a task and dies without a
// word. Trainers A and B read pass 0, then wait for pass 1 and receive C's
// task when its lease expires, so pass 0 completes with every record
// delivered exactly once.
//
// Trainer D holds another task of pass 0, renewing its lease, until the
// counts are checked: while pass 0 cannot end, every record A and B
// receive belongs to it.
func TestDeadTrainerTaskComesBack(t *testing.T) {
	needsProcesses(t)
	const records = 100
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--chunks-per-task", "1", "--task-timeout", "3s", "--failover-grace", "100ms"}})
	glob := writeDataset(t, t.TempDir(), records, 50, 20)
	addrs := client.WithAddrs(c.APIAddrs()...)
	d := newClient(t, addrs)
	if err := d.SetDataset([]string{glob}); err != nil {
		t.Fatal(err)
	}
	held, err := d.GetTask(0)
	if err != nil {
		t.Fatal(err)
	}
	stopRenewing := make(chan struct{})
	renewed := make(chan error, 1)
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopRenewing:
				renewed <- nil
				return
			case <-tick.C:
				if err := d.RenewLease(held.Meta); err != nil {
					renewed <- err
					return
				}
			}
		}
	}()

	cc := newClient(t, addrs)
	dead, err := cc.GetTask(0)
	if err != nil {
		t.Fatal(err)
	}
	cc.Close() // C dies: it never reports or renews
	deadRecs := map[int]bool{}
	for _, r := range taskRecords(t, dead) {
		deadRecs[r] = true
	}

	var (
		counts   recordCounts
		counting atomic.Bool  // off once pass 0 may end
		late     atomic.Int32 // records of C's task read while waiting for pass 1
		wg       sync.WaitGroup
		errs     = make(chan error, 2)
		trainers []*client.Client
	)
	counting.Store(true)
	for range 2 {
		tc := newClient(t, addrs, client.WithBuffer(1))
		trainers = append(trainers, tc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pass := 0; ; pass++ {
				tc.StartGetRecords(pass)
				for {
					r, err := tc.NextRecord()
					if errors.Is(err, client.ErrClientClosed) {
						errs <- nil
						return
					}
					if errors.Is(err, client.ErrNoMoreAvailable) || errors.Is(err, client.ErrPassBefore) {
						break
					}
					if err != nil {
						errs <- err
						return
					}
					n, err := strconv.Atoi(string(r))
					if err != nil {
						errs <- err
						return
					}
					if counting.Load() {
						counts.add(n)
						if pass == 1 && deadRecs[n] {
							late.Add(1)
						}
					}
				}
			}
		}()
	}

	heldRecs := map[int]bool{}
	for _, r := range taskRecords(t, held) {
		heldRecs[r] = true
	}
	c.WaitFor("every task but D's to be finished and its records delivered", time.Minute, func() bool {
		for r := range records {
			if !heldRecs[r] && counts.get(r) == 0 {
				return false
			}
		}
		st, err := d.Status()
		return err == nil && st.FSM.Pass == 0 && st.FSM.Done == st.FSM.Tasks-1
	})
	// Every task but D's is done: nothing else of pass 0 can be delivered.
	counting.Store(false)
	for r := range heldRecs {
		counts.add(r) // D trained on them
	}
	checkOnce(t, &counts, records, nil)
	t.Logf("%d of the %d records of the dead trainer's task were read by trainers waiting for pass 1", late.Load(), len(deadRecs))

	close(stopRenewing)
	if err := <-renewed; err != nil {
		t.Fatalf("D renewing its lease: %v", err)
	}
	if err := d.TaskFinished(held.Meta); err != nil {
		t.Fatal(err)
	}
	c.WaitFor("pass 0 to end", 30*time.Second, func() bool {
		st, err := d.Status()
		return err == nil && st.FSM.Pass >= 1
	})
	// The trainers go on with pass 1; stop them.
	for _, tc := range trainers {
		tc.Close()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestSlowTrainerKeepsItsTask: a trainer that takes several lease periods
// to read one task keeps it, because its reader renews the lease, while
// another trainer keeps asking for the pass's tasks: no record is
// delivered twice.
func TestSlowTrainerKeepsItsTask(t *testing.T) {
	needsProcesses(t)
	const records = 40
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--chunks-per-task", "1", "--task-timeout", "1s", "--failover-grace", "100ms"}})
	glob := writeDataset(t, t.TempDir(), records, records, 1000) // one chunk, one task
	addrs := client.WithAddrs(c.APIAddrs()...)
	slow := newClient(t, addrs, client.WithBuffer(0))
	if err := slow.SetDataset([]string{glob}); err != nil {
		t.Fatal(err)
	}
	var counts recordCounts
	slow.StartGetRecords(0)
	r, err := slow.NextRecord()
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(string(r))
	if err != nil {
		t.Fatal(err)
	}
	counts.add(n)

	// The other trainer asks for pass 0 until it is over.
	other := newClient(t, addrs, client.WithBuffer(0))
	otherDone := make(chan error, 1)
	go func() {
		for {
			other.StartGetRecords(0)
			for {
				r, err := other.NextRecord()
				if errors.Is(err, client.ErrPassBefore) {
					otherDone <- nil
					return
				}
				if errors.Is(err, client.ErrNoMoreAvailable) {
					break
				}
				if err != nil {
					otherDone <- err
					return
				}
				n, err := strconv.Atoi(string(r))
				if err != nil {
					otherDone <- err
					return
				}
				counts.add(n)
			}
			time.Sleep(100 * time.Millisecond) // a trainer's pace, not a wait
		}
	}()

	// Training: 40 records at 100ms take four lease periods.
	for {
		time.Sleep(100 * time.Millisecond)
		r, err := slow.NextRecord()
		if errors.Is(err, client.ErrPassBefore) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(string(r))
		if err != nil {
			t.Fatal(err)
		}
		counts.add(n)
	}
	select {
	case err := <-otherDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the other trainer did not see pass 0 end")
	}
	checkOnce(t, &counts, records, nil)
}

// TestCorruptChunkEndsInOneError: one task of the dataset has a good chunk
// followed by a corrupt one. A trainer reading the pass gets every other
// record once, none of that task's, and one *ChunkError naming the file and
// the chunk's offset, and the pass ends although the task fails
// failureMax+1 times.
func TestCorruptChunkEndsInOneError(t *testing.T) {
	needsProcesses(t)
	const records = 100
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--chunks-per-task", "2", "--failure-max", "3"}})
	dir := t.TempDir()
	glob := writeDataset(t, dir, records, records, 20)
	path := filepath.Join(dir, "train-000.recordio")
	idx, err := recordio.LoadIndexFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if idx.NumChunks() < 6 {
		t.Fatalf("%d chunks, want at least 6", idx.NumChunks())
	}
	// Task 2 holds chunks 2 and 3. Damage chunk 3's data after its header:
	// the leader indexes headers only, so the dataset is still accepted.
	lost := map[int]bool{}
	for _, ci := range []int{2, 3} {
		recs, err := recordio.ReadChunk(path, idx.ChunkOffsets[ci], idx.ChunkRecords[ci])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			n, _ := strconv.Atoi(string(r))
			lost[n] = true
		}
	}
	bad := idx.ChunkOffsets[3]
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("XX"), bad+20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	tc := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithBuffer(4))
	if err := tc.SetDataset([]string{glob}); err != nil {
		t.Fatal(err)
	}
	var (
		counts    recordCounts
		chunkErrs []*client.ChunkError
	)
	tc.StartGetRecords(0)
	done := make(chan error, 1)
	go func() {
		for {
			r, err := tc.NextRecord()
			if errors.Is(err, client.ErrPassBefore) {
				done <- nil
				return
			}
			var ce *client.ChunkError
			if errors.As(err, &ce) {
				chunkErrs = append(chunkErrs, ce)
				continue
			}
			if err != nil {
				done <- err
				return
			}
			n, err := strconv.Atoi(string(r))
			if err != nil {
				done <- err
				return
			}
			counts.add(n)
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("pass 0 did not end within a minute")
	}
	checkOnce(t, &counts, records, lost)
	if len(chunkErrs) != 1 {
		t.Fatalf("%d chunk errors %v, want 1", len(chunkErrs), chunkErrs)
	}
	ce := chunkErrs[0]
	if ce.Path != path || ce.Offset != bad || !errors.Is(ce, recordio.ErrCorrupt) {
		t.Fatalf("chunk error %v: want one about %s at offset %d matching recordio.ErrCorrupt", ce, path, bad)
	}
	t.Logf("NextRecord returned: %v", ce)
	st, err := tc.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.FSM.Pass != 1 {
		t.Fatalf("cluster at pass %d, want 1", st.FSM.Pass)
	}
}
