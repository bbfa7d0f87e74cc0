package client_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/recordio"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestNextRecord is the seed master's client test: several clients read
// several passes concurrently. Within a pass a client never sees a record
// twice, and the clients together see every record exactly once.
func TestNextRecord(t *testing.T) {
	const (
		total   = 50
		clients = 4
		passes  = 10
	)
	path := writeRecords(t, total, 4)
	local := apitest.NewLocal()
	ts := startServer(t, local, nil)
	// Small tasks, so that the clients compete for them; the clients'
	// own SetDataset calls are then ignored, as in the original.
	setup := newClient(t, client.WithAddr(ts.URL))
	resp, err := setup.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 2})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Tasks < 2*clients {
		t.Fatalf("%d tasks, want at least %d", resp.Tasks, 2*clients)
	}

	var (
		mu   sync.Mutex
		seen [passes]map[string]int
		wg   sync.WaitGroup
	)
	for p := range seen {
		seen[p] = make(map[string]int)
	}
	errs := make(chan error, clients)
	for range clients {
		c := newClient(t, client.WithAddr(ts.URL), client.WithBuffer(1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- readPasses(c, path, passes, func(pass int, r []byte) {
				mu.Lock()
				seen[pass][string(r)]++
				mu.Unlock()
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for p := range passes {
		for i := range total {
			if n := seen[p][strconv.Itoa(i)]; n != 1 {
				t.Errorf("pass %d: record %d seen %d times", p, i, n)
			}
		}
		if len(seen[p]) != total {
			t.Errorf("pass %d: %d distinct records, want %d", p, len(seen[p]), total)
		}
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Pass != passes || st.Failed != 0 {
		t.Errorf("state after the passes: pass %d, %d failed tasks; want pass %d, none failed", st.Pass, st.Failed, passes)
	}
}

// readPasses is the seed test's trainer loop.
func readPasses(c *client.Client, path string, passes int, got func(pass int, r []byte)) error {
	if err := c.SetDataset([]string{path}); err != nil {
		return err
	}
	for pass := range passes {
		c.StartGetRecords(pass)
		received := make(map[string]bool)
		for {
			r, err := c.NextRecord()
			if err != nil {
				if errors.Is(err, client.ErrPassBefore) || errors.Is(err, client.ErrNoMoreAvailable) {
					break
				}
				return err
			}
			if received[string(r)] {
				return errors.New("pass " + strconv.Itoa(pass) + ": duplicate record " + string(r))
			}
			received[string(r)] = true
			got(pass, r)
		}
	}
	return nil
}

// TestClientIndexing checks that WithClientIndexing sends the chunk list,
// the same one the leader would have made.
func TestClientIndexing(t *testing.T) {
	path := writeRecords(t, 50, 4)
	var (
		mu  sync.Mutex
		req rpc.SetDatasetRequest
	)
	sniff := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == rpc.PathDataset {
				b, err := io.ReadAll(r.Body)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				if err := json.Unmarshal(b, &req); err != nil {
					t.Error(err)
				}
				mu.Unlock()
				r.Body = io.NopCloser(bytesReader(b))
			}
			h.ServeHTTP(w, r)
		})
	}
	local := apitest.NewLocal()
	ts := startServer(t, local, sniff)
	c := newClient(t, client.WithAddr(ts.URL), client.WithClientIndexing(true))
	resp, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 3})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(req.Globs) != 0 || len(req.Chunks) == 0 || req.ChunksPerTask != 3 {
		t.Fatalf("request carried globs %q, %d chunks, %d chunks per task; want chunks only, 3 per task",
			req.Globs, len(req.Chunks), req.ChunksPerTask)
	}
	st := local.FSM().Stats(fsm.DefaultJob)
	if st.Chunks != len(req.Chunks) || resp.Chunks != len(req.Chunks) || resp.Ignored {
		t.Fatalf("dataset has %d chunks, response %+v; want %d", st.Chunks, resp, len(req.Chunks))
	}
	total := 0
	for _, ch := range req.Chunks {
		if ch.Path != path {
			t.Errorf("chunk path %q, want %q", ch.Path, path)
		}
		total += int(ch.Records)
	}
	if total != 50 {
		t.Errorf("chunks hold %d records, want 50", total)
	}

	// The records read through the client-made chunk list are all there.
	c.StartGetRecords(0)
	got := make(map[string]bool)
	for {
		r, err := c.NextRecord()
		if errors.Is(err, client.ErrPassBefore) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[string(r)] = true
	}
	if len(got) != 50 {
		t.Fatalf("read %d distinct records, want 50", len(got))
	}
}

// TestReadErrorFailsTask checks that a chunk that cannot be read fails the
// task instead of finishing it, delivers none of its records, and reaches
// NextRecord as a *ChunkError.
func TestReadErrorFailsTask(t *testing.T) {
	path := writeRecords(t, 50, 4)
	local := apitest.NewLocal()
	ts := startServer(t, local, nil)
	c := newClient(t, client.WithAddr(ts.URL))
	zero := 0
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 1000, FailureMax: &zero}); err != nil {
		t.Fatal(err)
	}
	// Damage the file after the leader indexed it.
	if err := os.Truncate(path, 40); err != nil {
		t.Fatal(err)
	}
	c.StartGetRecords(0)
	var chunkErrs int
	for {
		r, err := c.NextRecord()
		if errors.Is(err, client.ErrAllTaskFailed) {
			break
		}
		var ce *client.ChunkError
		switch {
		case errors.As(err, &ce):
			if ce.Path != path || !errors.Is(err, recordio.ErrCorrupt) {
				t.Errorf("chunk error %v, want one about %s matching recordio.ErrCorrupt", err, path)
			}
			chunkErrs++
		case err != nil:
			t.Fatalf("NextRecord: %v, want a *ChunkError and then ErrAllTaskFailed", err)
		default:
			t.Fatalf("NextRecord delivered record %q of a task that cannot be read", r)
		}
	}
	if chunkErrs != 1 {
		t.Fatalf("%d chunk errors, want 1", chunkErrs)
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Failed != 1 || st.Done != 0 {
		t.Fatalf("%d tasks failed and %d done, want 1 and 0", st.Failed, st.Done)
	}
}

// TestStartGetRecordsAgain checks that a new StartGetRecords stops the
// reader of the earlier one, which hands its task back.
func TestStartGetRecordsAgain(t *testing.T) {
	three := 3
	path := writeRecords(t, 50, 4)
	local := apitest.NewLocal()
	ts := startServer(t, local, nil)
	c := newClient(t, client.WithAddr(ts.URL))
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 1000, FailureMax: &three}); err != nil {
		t.Fatal(err)
	}
	c.StartGetRecords(0)
	if _, err := c.NextRecord(); err != nil {
		t.Fatal(err)
	}
	c.StartGetRecords(0)
	got := make(map[string]bool)
	for {
		r, err := c.NextRecord()
		if errors.Is(err, client.ErrPassBefore) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[string(r)] = true
	}
	if len(got) != 50 {
		t.Fatalf("read %d distinct records after the restart, want 50", len(got))
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Pass != 1 {
		t.Fatalf("pass %d, want 1", st.Pass)
	}
}

// TestNextRecordAfterClose checks that a NextRecord waiting for a pass
// returns when the client is closed.
func TestNextRecordAfterClose(t *testing.T) {
	local := apitest.NewLocal()
	ts := startServer(t, local, nil)
	c, err := client.NewClient(client.WithAddr(ts.URL), client.WithLogger(testLogger(t, "client")))
	if err != nil {
		t.Fatal(err)
	}
	c.StartGetRecords(0) // no dataset: the reader waits
	done := make(chan error, 1)
	go func() {
		_, err := c.NextRecord()
		done <- err
	}()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, client.ErrClientClosed) {
		t.Fatalf("NextRecord after Close: %v, want ErrClientClosed", err)
	}
}
