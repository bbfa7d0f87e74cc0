package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// finishedOf returns the finished task a GetTask request carries, nil for
// none, and leaves r's body to be read again.
func finishedOf(t *testing.T, r *http.Request) *rpc.TaskMeta {
	t.Helper()
	if r.URL.Path != rpc.PathTaskGet {
		return nil
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Error(err)
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	var in rpc.GetTaskRequest
	if err := json.Unmarshal(b, &in); err != nil {
		t.Error(err)
		return nil
	}
	return in.Finished
}

// TestGetTaskAfter: GetTaskAfter finishes the task given and leases the
// next in one call; its FinishOutcome says how the finish went, a finish
// of a task finished already being ignored, one of a task never leased
// under that epoch an ErrStaleEpoch, and the finish of the pass's last
// task counting with ErrPassBefore.
func TestGetTaskAfter(t *testing.T) {
	path := writeRecords(t, 3, 1)
	local := apitest.NewLocal()
	ts := startServer(t, local, nil)
	c := newClient(t, client.WithAddr(ts.URL))
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 1}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := c.GetTask(0)
	if err != nil {
		t.Fatal(err)
	}
	b, o, err := c.GetTaskAfter(ctx, 0, a.Meta)
	if err != nil || !o.Answered || o.Err != nil || o.Ignored || b.Meta.ID == a.Meta.ID {
		t.Fatalf("GetTaskAfter(%+v): %+v, %+v, %v", a.Meta, b, o, err)
	}
	if ts, _ := local.FSM().Task(fsm.DefaultJob, a.Meta.ID); ts.Queue != "done" {
		t.Fatalf("task %d is %s after GetTaskAfter finished it", a.Meta.ID, ts.Queue)
	}
	// A finish of a task finished already is ignored; one under an epoch
	// it was never leased under is stale; the lease is granted all the
	// same.
	c2, o, err := c.GetTaskAfter(ctx, 0, a.Meta)
	if err != nil || !o.Answered || o.Err != nil || !o.Ignored {
		t.Fatalf("a second finish of %+v: %+v, %v", a.Meta, o, err)
	}
	if _, o, err = c.GetTaskAfter(ctx, 0, client.TaskMeta{ID: b.Meta.ID, Epoch: b.Meta.Epoch + 5}); !errors.Is(err, client.ErrNoMoreAvailable) ||
		!o.Answered || !errors.Is(o.Err, client.ErrStaleEpoch) {
		t.Fatalf("a finish of a stale epoch: %+v, %v; want ErrStaleEpoch, and ErrNoMoreAvailable", o, err)
	}
	if _, o, err = c.GetTaskAfter(ctx, 0, b.Meta); !errors.Is(err, client.ErrNoMoreAvailable) || !o.Answered || o.Err != nil {
		t.Fatalf("the finish of %+v with a task left to another: %+v, %v; want it counted, and ErrNoMoreAvailable", b.Meta, o, err)
	}
	// The last finish ends the pass: ErrPassBefore, the finish counted.
	if _, o, err = c.GetTaskAfter(ctx, 0, c2.Meta); !errors.Is(err, client.ErrPassBefore) || !o.Answered || o.Err != nil {
		t.Fatalf("the last finish: %+v, %v; want it counted, and ErrPassBefore", o, err)
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Pass != 1 || st.Pending != 0 {
		t.Fatalf("after the last finish: %+v", st)
	}
}

// TestGetTaskAfterRetried: a GetTaskAfter whose answer was lost is
// retried with its request id, and answered as the first attempt was,
// the finish's outcome included: on a task leased, and on the pass's end.
func TestGetTaskAfterRetried(t *testing.T) {
	path := writeRecords(t, 2, 1)
	local := apitest.NewLocal()
	var (
		mu     sync.Mutex
		ids    []string
		bodies [][]byte
	)
	ts := startServer(t, local, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if finishedOf(t, r) == nil {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			mu.Lock()
			ids = append(ids, r.Header.Get(rpc.HeaderRequestID))
			bodies = append(bodies, rec.Body.Bytes())
			lose := len(ids)%2 == 1 // every first attempt's answer is lost
			mu.Unlock()
			if lose {
				answerError(w, rpc.CodeUnknownOutcome)
				return
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
		})
	})
	c := newClient(t, client.WithAddr(ts.URL))
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 1}); err != nil {
		t.Fatal(err)
	}
	a, err := c.GetTask(0)
	if err != nil {
		t.Fatal(err)
	}
	b, o, err := c.GetTaskAfter(context.Background(), 0, a.Meta)
	if err != nil || !o.Answered || o.Err != nil || b.Meta.ID == a.Meta.ID {
		t.Fatalf("GetTaskAfter retried: %+v, %+v, %v", b, o, err)
	}
	_, o, err = c.GetTaskAfter(context.Background(), 0, b.Meta)
	if !errors.Is(err, client.ErrPassBefore) || !o.Answered || o.Err != nil {
		t.Fatalf("the last GetTaskAfter retried: %+v, %v; want the finish counted, and ErrPassBefore", o, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 4 || ids[0] != ids[1] || ids[2] != ids[3] || ids[0] == ids[2] {
		t.Fatalf("request ids %q: want each call's retry under its first attempt's id", ids)
	}
	for i := 0; i < 4; i += 2 {
		// The answer to the retry is the first one's (its lease says
		// what remains of it).
		var first, retry struct {
			Task struct {
				Meta rpc.TaskMeta `json:"meta"`
			} `json:"task"`
			Code      string             `json:"code"`
			AppliedAt time.Time          `json:"applied_at"`
			Finish    *rpc.FinishOutcome `json:"finish"`
		}
		if json.Unmarshal(bodies[i], &first) != nil || json.Unmarshal(bodies[i+1], &retry) != nil ||
			first.Task.Meta != retry.Task.Meta || first.Code != retry.Code || !first.AppliedAt.Equal(retry.AppliedAt) ||
			first.Finish == nil || retry.Finish == nil || *first.Finish != *retry.Finish {
			t.Errorf("retry answered %s, the first attempt %s", bodies[i+1], bodies[i])
		}
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Pass != 1 || st.Pending != 0 {
		t.Fatalf("after the pass: %+v", st)
	}
}

// readPass reads pass 0 to its end with c and returns the records in the
// order read.
func readPass(t *testing.T, c *client.Client) []string {
	t.Helper()
	c.StartGetRecords(0)
	var got []string
	for {
		r, err := c.NextRecord()
		if errors.Is(err, client.ErrPassBefore) {
			return got
		}
		if err != nil {
			t.Fatalf("after %d records: %v", len(got), err)
		}
		got = append(got, string(r))
	}
}

// checkOnce fails unless got holds "0" to "n-1" once each.
func checkOnce(t *testing.T, got []string, n int) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range got {
		seen[r]++
	}
	for i := range n {
		if seen[strconv.Itoa(i)] != 1 {
			t.Errorf("record %d read %d times", i, seen[strconv.Itoa(i)])
		}
	}
	if len(got) != n {
		t.Errorf("read %d records, want %d", len(got), n)
	}
}

// TestReaderWritesOncePerTask: the record reader finishes each task with
// the GetTask that leases the next, and the pass's last task with the
// GetTask answered ErrPassBefore: one write per task, and one more per
// pass, and no TaskFinished; with leases, and with tasks held by the
// Client's session.
func TestReaderWritesOncePerTask(t *testing.T) {
	for _, sessions := range []bool{false, true} {
		t.Run("sessions="+strconv.FormatBool(sessions), func(t *testing.T) {
			const tasks = 6
			path := writeRecords(t, 3*tasks, 1)
			local := apitest.NewLocal()
			var b httpapi.Backend = local
			if sessions {
				sl, stop := local.WithSessions()
				t.Cleanup(stop)
				b = sl
			}
			var requests counter
			var carried atomic.Int32
			ts := startServer(t, b, func(h http.Handler) http.Handler {
				return requests.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if finishedOf(t, r) != nil {
						carried.Add(1)
					}
					h.ServeHTTP(w, r)
				}))
			})
			c := newClient(t, client.WithAddr(ts.URL))
			if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 3}); err != nil {
				t.Fatal(err)
			}
			checkOnce(t, readPass(t, c), 3*tasks)
			if got := c.Session() != 0; got != sessions {
				t.Fatalf("the client has a session: %v, want %v", got, sessions)
			}
			if st := local.FSM().Stats(fsm.DefaultJob); st.Pass != 1 || st.Failed != 0 {
				t.Fatalf("after the pass: %+v", st)
			}
			if n := requests.get(rpc.PathTaskFinished); n != 0 {
				t.Errorf("%d TaskFinished requests, want none: each finish rides a GetTask", n)
			}
			if got, n := requests.get(rpc.PathTaskGet), carried.Load(); got != tasks+1 || n != tasks {
				t.Errorf("%d GetTask requests, %d of them carrying a finish; want %d, %d (%v)", got, n, tasks+1, tasks, &requests)
			}
		})
	}
}

// TestReaderFinishOfAStaleEpoch: a finish that a GetTask carried and the
// cluster refused (a stale epoch) is handled as the answer to a
// TaskFinished would be: logged, not sent again; the reader goes on, and
// the task, whose lease then runs out, is read again.
func TestReaderFinishOfAStaleEpoch(t *testing.T) {
	const tasks = 3
	path := writeRecords(t, 2*tasks, 1)
	local := apitest.NewLocal()
	var skew atomic.Int64 // the cluster's clock runs ahead by it
	local.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	var requests counter
	var tampered atomic.Bool
	ts := startServer(t, local, func(h http.Handler) http.Handler {
		return requests.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if finishedOf(t, r) != nil && tampered.CompareAndSwap(false, true) {
				// The first finish names an epoch the task was never
				// leased under.
				var in rpc.GetTaskRequest
				if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
					t.Error(err)
				}
				in.Finished.Epoch += 7
				b, _ := json.Marshal(in)
				r.Body = io.NopCloser(bytes.NewReader(b))
				r.ContentLength = int64(len(b))
			}
			h.ServeHTTP(w, r)
		}))
	})
	c := newClient(t, client.WithAddr(ts.URL))
	failureMax := 3
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 2, FailureMax: &failureMax}); err != nil {
		t.Fatal(err)
	}
	// The reader ends with ErrNoMoreAvailable while the task whose finish
	// was refused is still leased; once its lease ran out, a reader gets
	// it again.
	var got []string
	deadline := time.Now().Add(20 * time.Second)
	for ended := false; !ended; {
		if time.Now().After(deadline) {
			st := local.FSM().Stats(fsm.DefaultJob)
			t.Fatalf("the pass did not end within 20s; read %q; %+v (%v)", got, st, &requests)
		}
		c.StartGetRecords(0)
		for {
			r, err := c.NextRecord()
			if errors.Is(err, client.ErrPassBefore) {
				ended = true
				break
			}
			if errors.Is(err, client.ErrNoMoreAvailable) {
				// The reader holds nothing: the lease left runs out, and
				// the leader's ticker, which this backend lacks, expires
				// it.
				skew.Add(int64(2 * time.Minute))
				if _, err := local.Apply(context.Background(), &fsm.Tick{}); err != nil {
					t.Fatal(err)
				}
				break
			}
			if err != nil {
				t.Fatalf("after %d records: %v", len(got), err)
			}
			got = append(got, string(r))
		}
	}
	if !tampered.Load() {
		t.Fatal("no GetTask carried a finish")
	}
	if len(got) != 2*tasks+2 {
		t.Fatalf("read %d records, want %d: every task once, and the one whose finish was refused again", len(got), 2*tasks+2)
	}
	if n := requests.get(rpc.PathTaskFinished); n != 0 {
		t.Errorf("%d TaskFinished requests, want none: a refused finish is not sent again", n)
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Pass != 1 {
		t.Fatalf("after the pass: %+v", st)
	}
}

// belowLevel9 answers a GetTask that carries a finish as a cluster below
// protocol level 9 does, or, with invalid, as a node of a release before
// the field does, and counts those requests.
func belowLevel9(t *testing.T, invalid bool, refused *atomic.Int32) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if finishedOf(t, r) == nil {
				h.ServeHTTP(w, r)
				return
			}
			refused.Add(1)
			e := rpc.Errorf(rpc.CodeUnavailable, "the cluster is not upgraded yet: a GetTask that carries the finished task needs protocol level 9, and the cluster is at 8")
			if invalid {
				e = rpc.Errorf(rpc.CodeInvalid, `malformed JSON body: json: unknown field "finished"`)
			}
			w.Header().Set("Content-Type", "application/json")
			if e.Code == rpc.CodeUnavailable {
				w.Header().Set("Retry-After", "1")
			}
			w.WriteHeader(e.Status)
			json.NewEncoder(w).Encode(e)
		})
	}
}

// TestReaderBelowLevel9: against a cluster that refuses a GetTask
// carrying a finish (below protocol level 9, or a node of an earlier
// release), GetTaskAfter fails at once with ErrUpgradePending, nothing
// done, and the reader reports its tasks with TaskFinished and asks with
// GetTask, without trying again for a while (rideRetry); once that is
// over it tries again.
func TestReaderBelowLevel9(t *testing.T) {
	for _, invalid := range []bool{false, true} {
		t.Run("invalid="+strconv.FormatBool(invalid), func(t *testing.T) {
			const tasks = 5
			path := writeRecords(t, 2*tasks, 1)
			local := apitest.NewLocal()
			var requests counter
			var refused atomic.Int32
			ts := startServer(t, local, func(h http.Handler) http.Handler { return requests.wrap(belowLevel9(t, invalid, &refused)(h)) })
			c := newClient(t, client.WithAddr(ts.URL))
			failureMax := 3
			if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 2, FailureMax: &failureMax}); err != nil {
				t.Fatal(err)
			}
			a, err := c.GetTask(0)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, o, err := c.GetTaskAfter(context.Background(), 0, a.Meta)
			if !errors.Is(err, client.ErrUpgradePending) || o.Answered {
				t.Fatalf("GetTaskAfter below level 9: %+v, %v; want ErrUpgradePending, no outcome", o, err)
			}
			if d := time.Since(start); d > 2*time.Second || refused.Load() != 1 {
				t.Fatalf("GetTaskAfter below level 9 took %v and %d requests: it is not retried", d, refused.Load())
			}
			if ts, _ := local.FSM().Task(fsm.DefaultJob, a.Meta.ID); ts.Queue != "pending" {
				t.Fatalf("task %d is %s after a refused GetTaskAfter", a.Meta.ID, ts.Queue)
			}
			if err := c.TaskFailed(a.Meta); err != nil { // dispatched again
				t.Fatal(err)
			}

			refused.Store(0)
			checkOnce(t, readPass(t, c), 2*tasks)
			if n := refused.Load(); n != 1 {
				t.Errorf("%d GetTask requests carried a finish, want 1: the reader does not try again for a while", n)
			}
			if n := requests.get(rpc.PathTaskFinished); n != tasks {
				t.Errorf("%d TaskFinished requests, want %d", n, tasks)
			}
			if st := local.FSM().Stats(fsm.DefaultJob); st.Pass != 1 || st.Done+st.Todo != tasks || st.Pending != 0 {
				t.Fatalf("after the pass: %+v", st)
			}
		})
	}

	// Once rideRetry is over, the reader tries again.
	path := writeRecords(t, 20, 1)
	local := apitest.NewLocal()
	var refused atomic.Int32
	ts := startServer(t, local, belowLevel9(t, false, &refused))
	c := newClient(t, client.WithAddr(ts.URL), client.WithRideRetry(time.Nanosecond))
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 2}); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, readPass(t, c), 20)
	if n := refused.Load(); n < 2 {
		t.Errorf("%d GetTask requests carried a finish, want more than one once rideRetry is over", n)
	}
}
