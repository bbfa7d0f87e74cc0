package client_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/recordio"
	"github.com/raftmaster/raftmaster/rpc"
)

// waitFor polls cond every 10ms until it holds, and fails the test after
// timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// answerError writes the error body the server would send for code.
func answerError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rpc.HTTPStatus(code))
	json.NewEncoder(w).Encode(&rpc.Error{Code: code, Message: "from the test"})
}

// TestReaderRenewsLease checks that the reader renews the lease of the task
// it holds while the trainer is slow to take its records.
func TestReaderRenewsLease(t *testing.T) {
	path := writeRecords(t, 20, 4)
	var requests counter
	ts := startServer(t, apitest.NewLocal(), requests.wrap)
	c := newClient(t, client.WithAddr(ts.URL))
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 1000, TaskTimeout: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	c.StartGetRecords(0)
	if _, err := c.NextRecord(); err != nil {
		t.Fatal(err)
	}
	// The reader holds the task while it waits for us to take the next record.
	waitFor(t, "two lease renewals", 10*time.Second, func() bool { return requests.get(rpc.PathTaskRenew) >= 2 })
	got := 1
	for {
		_, err := c.NextRecord()
		if errors.Is(err, client.ErrPassBefore) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got++
	}
	if got != 20 {
		t.Fatalf("read %d records, want 20", got)
	}
}

// TestReaderStopsRenewingLostLease checks that a renewal answered with
// stale_epoch ends the renewals, and that the task's records are still
// delivered and the task reported finished.
func TestReaderStopsRenewingLostLease(t *testing.T) {
	const records = 20
	path := writeRecords(t, records, 4)
	local := apitest.NewLocal()
	var requests counter
	ts := startServer(t, local, func(h http.Handler) http.Handler {
		return requests.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == rpc.PathTaskRenew {
				answerError(w, "stale_epoch")
				return
			}
			h.ServeHTTP(w, r)
		}))
	})
	c := newClient(t, client.WithAddr(ts.URL))
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 1000, TaskTimeout: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	c.StartGetRecords(0)
	got := 0
	for {
		_, err := c.NextRecord()
		if errors.Is(err, client.ErrPassBefore) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got++
		if got == 1 {
			waitFor(t, "a renewal", 10*time.Second, func() bool { return requests.get(rpc.PathTaskRenew) >= 1 })
		}
		time.Sleep(30 * time.Millisecond) // training; several renewal periods in all
	}
	if got != records {
		t.Fatalf("read %d records, want %d", got, records)
	}
	if n := requests.get(rpc.PathTaskRenew); n != 1 {
		t.Fatalf("%d renewals, want 1: the first one lost the lease", n)
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Pass != 1 {
		t.Fatalf("pass %d, want 1: the task was finished", st.Pass)
	}
}

// TestNextRecordReturnsPermanentError checks that an error the cluster will
// answer again whatever the reader does ends the pass with that error
// rather than being retried forever.
func TestNextRecordReturnsPermanentError(t *testing.T) {
	local := apitest.NewLocal()
	ts := startServer(t, local, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == rpc.PathTaskGet {
				answerError(w, "invalid")
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	c := newClient(t, client.WithAddr(ts.URL))
	c.StartGetRecords(0)
	done := make(chan error, 1)
	go func() {
		_, err := c.NextRecord()
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, client.ErrInvalid) {
			t.Fatalf("NextRecord: %v, want an error matching ErrInvalid", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("NextRecord did not return the invalid answer to GetTask within 20s")
	}
}

// TestStartGetRecordsDoesNotWaitForReport checks that StartGetRecords
// returns at once although the reader of the previous pass is reporting
// its task to a cluster that does not answer, and that a NextRecord
// waiting meanwhile goes on with the new pass.
func TestStartGetRecordsDoesNotWaitForReport(t *testing.T) {
	const records = 20
	path := writeRecords(t, records, 4)
	local := apitest.NewLocal()
	var down atomic.Bool
	var finishedWhileDown atomic.Int32
	ts := startServer(t, local, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if down.Load() {
				// The report on its own, or riding a GetTask.
				if r.URL.Path == rpc.PathTaskFinished || finishedOf(t, r) != nil {
					finishedWhileDown.Add(1)
				}
				answerError(w, rpc.CodeNoLeader)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	c := newClient(t, client.WithAddr(ts.URL), client.WithRetry(time.Minute))
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 1000}); err != nil {
		t.Fatal(err)
	}
	c.StartGetRecords(0)
	for i := range records {
		if i == records-1 {
			// The reader reports the task once we take the last record.
			down.Store(true)
		}
		if _, err := c.NextRecord(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the task's report", 10*time.Second, func() bool { return finishedWhileDown.Load() > 0 })

	next := make(chan error, 1)
	go func() {
		_, err := c.NextRecord()
		next <- err
	}()
	started := make(chan struct{})
	go func() {
		c.StartGetRecords(1)
		close(started)
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("StartGetRecords(1) did not return within 10s while the previous pass's reader was reporting to an unreachable cluster")
	}

	// The report goes through once the cluster is back, and pass 1 starts.
	down.Store(false)
	got := 0
	select {
	case err := <-next:
		if err != nil {
			t.Fatalf("NextRecord waiting across StartGetRecords: %v, want a record of pass 1", err)
		}
		got++
	case <-time.After(30 * time.Second):
		t.Fatal("NextRecord waiting across StartGetRecords got nothing of pass 1 within 30s")
	}
	for {
		_, err := c.NextRecord()
		if errors.Is(err, client.ErrPassBefore) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got++
	}
	if got != records {
		t.Fatalf("pass 1: read %d records, want %d", got, records)
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Pass != 2 {
		t.Fatalf("pass %d, want 2", st.Pass)
	}
}

func (c *counter) get(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[path]
}

// TestCorruptChunkIsReportedOnce checks that a task with a corrupt chunk
// delivers none of its records, fails each time it is dispatched, and
// shows its error once, while the other tasks are read as usual.
func TestCorruptChunkIsReportedOnce(t *testing.T) {
	const records, failureMax = 50, 3
	path := writeRecords(t, records, 4)
	idx, err := recordio.LoadIndexFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Task 2 is chunks 2 and 3; damage chunk 3 after its header, which the
	// server's index does not read.
	lost := map[string]bool{}
	for _, ci := range []int{2, 3} {
		recs, err := recordio.ReadChunk(path, idx.ChunkOffsets[ci], idx.ChunkRecords[ci])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			lost[string(r)] = true
		}
	}
	bad := idx.ChunkOffsets[3]
	flipByte(t, path, bad+22)

	var requests counter
	local := apitest.NewLocal()
	ts := startServer(t, local, requests.wrap)
	c := newClient(t, client.WithAddr(ts.URL))
	fm := failureMax
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 2, FailureMax: &fm}); err != nil {
		t.Fatal(err)
	}
	c.StartGetRecords(0)
	seen := map[string]int{}
	var chunkErrs []*client.ChunkError
	for {
		r, err := c.NextRecord()
		if errors.Is(err, client.ErrPassBefore) {
			break
		}
		var ce *client.ChunkError
		if errors.As(err, &ce) {
			chunkErrs = append(chunkErrs, ce)
			continue
		}
		if err != nil {
			t.Fatalf("NextRecord: %v", err)
		}
		seen[string(r)]++
	}
	for i := range records {
		r := strconv.Itoa(i)
		switch n := seen[r]; {
		case lost[r] && n != 0:
			t.Errorf("record %s of the corrupt task delivered %d times, want never", r, n)
		case !lost[r] && n != 1:
			t.Errorf("record %s delivered %d times, want once", r, n)
		}
	}
	if len(chunkErrs) != 1 {
		t.Fatalf("%d chunk errors (%v), want 1", len(chunkErrs), chunkErrs)
	}
	ce := chunkErrs[0]
	if ce.Path != path || ce.Offset != bad || ce.Chunk != 1 || ce.Task.ID != 2 || !errors.Is(ce, recordio.ErrCorrupt) {
		t.Errorf("chunk error %+v (%v), want chunk 1 of task 2 at %s offset %d, matching recordio.ErrCorrupt", ce, ce, path, bad)
	}
	if n := requests.get(rpc.PathTaskFailed); n != failureMax+1 {
		t.Errorf("%d TaskFailed reports, want %d: one for each dispatch of the corrupt task", n, failureMax+1)
	}
}

// flipByte inverts the byte at off in the file at path.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}
