package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// sessionServer starts a Local backend that keeps sessions, with a
// dataset of n one-record chunks, perTask to a task, behind wrap.
func sessionServer(t *testing.T, n, perTask int, wrap func(http.Handler) http.Handler) (*apitest.Local, string) {
	t.Helper()
	local := apitest.NewLocal()
	backend, stop := local.WithSessions()
	t.Cleanup(stop)
	ts := startServer(t, backend, wrap)
	setup := newClient(t, client.WithAddr(ts.URL), client.WithoutSession())
	failures := 3
	params := client.DatasetParams{ChunksPerTask: perTask, TaskTimeout: time.Hour, FailureMax: &failures}
	if _, err := setup.SetDatasetWithParams([]string{writeRecords(t, n, 1)}, params); err != nil {
		t.Fatal(err)
	}
	return local, ts.URL
}

// cuttable is a transport that a test can cut, as a process that dies
// or loses the network stops talking.
type cuttable struct {
	cut atomic.Bool
	rt  http.RoundTripper
}

func (c *cuttable) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("cut")
	}
	return c.rt.RoundTrip(r)
}

func TestSessionHoldsTheTaskAndCloseReturnsIt(t *testing.T) {
	local, url := sessionServer(t, 2, 1, nil)
	c, err := client.NewClient(client.WithAddr(url), client.WithLogger(testLogger(t, "client")))
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.GetTask(0)
	if err != nil {
		t.Fatal(err)
	}
	if task.Session == 0 || task.Session != c.Session() || task.Lease != 0 {
		t.Fatalf("task %+v, client session %d: want it held by the client's session", task, c.Session())
	}
	if st := local.FSM().Stats(""); st.Held != 1 {
		t.Fatalf("stats %+v: want the task held", st)
	}
	// Close gives it back at once, as no failure.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	st := local.FSM().Stats("")
	if st.Held != 0 || st.Todo != 2 {
		t.Fatalf("after Close: %+v; want both tasks todo", st)
	}
	ts, err := local.FSM().Task("", task.Meta.ID)
	if err != nil || ts.Failures != 0 {
		t.Fatalf("task after Close: %+v, %v; want no failure", ts, err)
	}
}

func TestDeadClientsTaskComesBackAfterItsTTL(t *testing.T) {
	local, url := sessionServer(t, 1, 1, nil)
	link := &cuttable{rt: http.DefaultTransport.(*http.Transport).Clone()}
	dead := newClient(t, client.WithAddr(url), client.WithSessionTTL(time.Second),
		client.WithHTTPClient(&http.Client{Transport: link}), client.WithRetry(time.Second))
	task, err := dead.GetTask(0)
	if err != nil {
		t.Fatal(err)
	}
	old := dead.Session()
	other := newClient(t, client.WithAddr(url))
	if _, err := other.GetTask(0); !errors.Is(err, client.ErrNoMoreAvailable) {
		t.Fatalf("a second trainer got %v, want no_more_available while the task is held", err)
	}
	// The first trainer stops talking: its keep-alives stop, and the
	// leader ends its session, counting the task's failure.
	link.cut.Store(true)
	var again client.Task
	waitFor(t, "the task leased to the other trainer", 30*time.Second, func() bool {
		again, err = other.GetTask(0)
		return err == nil
	})
	if again.Meta.ID != task.Meta.ID || again.Meta.Epoch == task.Meta.Epoch || again.Session != other.Session() {
		t.Fatalf("the other trainer got %+v, want task %d under a new epoch, held by its session", again, task.Meta.ID)
	}
	if ts, _ := local.FSM().Task("", task.Meta.ID); ts.Failures != 1 {
		t.Fatalf("task %+v: want the expiry counted as a failure", ts)
	}
	// Back on the network, the first trainer's report under its ended
	// session is refused, never applied; its next call opens a new
	// session.
	link.cut.Store(false)
	if err := dead.TaskFinished(task.Meta); !errors.Is(err, client.ErrSessionExpired) {
		t.Fatalf("a finish under an ended session answered %v, want ErrSessionExpired", err)
	}
	if ts, _ := local.FSM().Task("", task.Meta.ID); ts.Queue != "held" {
		t.Fatalf("task %+v: the ended session's report changed it", ts)
	}
	if _, err := dead.GetTask(0); !errors.Is(err, client.ErrNoMoreAvailable) {
		t.Fatalf("GetTask after the session ended: %v, want no_more_available", err)
	}
	if s := dead.Session(); s == 0 || s == old {
		t.Fatalf("session %d after %d ended: want a new one", s, old)
	}
}

func TestReaderReportsProgressAndRenewsNothing(t *testing.T) {
	var (
		requests counter
		mu       sync.Mutex
		progress []rpc.SessionProgress
	)
	wrap := func(h http.Handler) http.Handler {
		return requests.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && bytes.HasSuffix([]byte(r.URL.Path), []byte("/keepalive")) {
				b, _ := io.ReadAll(r.Body)
				var in rpc.KeepAliveRequest
				if json.Unmarshal(b, &in) == nil {
					mu.Lock()
					progress = append(progress, in.Progress...)
					mu.Unlock()
				}
				r.Body = io.NopCloser(bytes.NewReader(b))
			}
			h.ServeHTTP(w, r)
		}))
	}
	_, url := sessionServer(t, 20, 100, wrap)
	c := newClient(t, client.WithAddr(url), client.WithSessionTTL(time.Second))
	c.StartGetRecords(0)
	if _, err := c.NextRecord(); err != nil {
		t.Fatal(err)
	}
	// While the trainer holds its task, keep-alives say how far it read.
	waitFor(t, "a keep-alive reporting the task's progress", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range progress {
			if p.Task == 1 && p.Records >= 1 {
				return true
			}
		}
		return false
	})
	if n := requests.get(rpc.PathTaskRenew); n != 0 {
		t.Fatalf("%d renewals of a task held by the session", n)
	}
}
