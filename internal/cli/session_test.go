package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// sessionLocal is a Local backend that keeps sessions: each lives while
// the state holds it.
type sessionLocal struct{ *apitest.Local }

func (l sessionLocal) Sessions() (httpapi.SessionKeeper, bool) { return stateKeeper{l.FSM()}, true }

// stateKeeper is a keeper whose sessions live as long as the state holds
// them, always with their whole TTL left.
type stateKeeper struct{ f *fsm.FSM }

func (k stateKeeper) KeepAlive(id uint64, owner [16]byte, _ []rpc.SessionProgress) (time.Duration, error) {
	ttl, own, open := k.f.SessionOpen(id)
	switch {
	case !open:
		return 0, fsm.ErrSessionExpired
	case own != owner:
		return 0, fsm.ErrForeignClient
	}
	return ttl, nil
}

func (stateKeeper) Touch(uint64) {}

func (k stateKeeper) Remaining(id uint64) (time.Duration, bool) {
	ttl, _, open := k.f.SessionOpen(id)
	return ttl, open
}

// TestSessionCommands: session list shows each open session with its
// TTL, time left, age, tasks and keys, as a table or JSON; session close
// ends one, once.
func TestSessionCommands(t *testing.T) {
	local := apitest.NewLocal()
	ts := httptest.NewServer(httpapi.NewHandler(sessionLocal{local}, httpapi.Config{}, nil))
	t.Cleanup(ts.Close)
	local.API = strings.TrimPrefix(ts.URL, "http://")
	session := func(args ...string) (int, string, string) {
		return runCLI(append([]string{"session", args[0], "--addr", local.API, "--retry", "5s"}, args[1:]...)...)
	}
	ctx := context.Background()
	apply := func(c fsm.Command) *fsm.Result {
		t.Helper()
		res, err := local.Apply(ctx, c)
		if err != nil || res.Err() != nil {
			t.Fatalf("%T: %v %v", c, err, res.Err())
		}
		return res
	}
	chunks := []fsm.Chunk{{Path: "/data/a", Records: 1}, {Path: "/data/b", Records: 1}}
	if res, err := local.SetDataset(ctx, fsm.DefaultJob, fsm.RequestID{}, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute}, nil, chunks); err != nil || res.Err() != nil {
		t.Fatal(res, err)
	}
	req := func() fsm.RequestID { return fsm.RequestID{Client: uuid.New(), Seq: 1} }
	busy := apply(&fsm.OpenSession{Header: fsm.Header{Request: req()}, TTL: 10 * time.Second}).Session
	idle := apply(&fsm.OpenSession{Header: fsm.Header{Request: req()}, TTL: 3 * time.Second}).Session
	apply(&fsm.GetTask{Header: fsm.Header{Request: req(), Session: busy}})
	apply(&fsm.KVCompareAndSet{Header: fsm.Header{Request: req(), Session: busy, Attach: true}, Key: "rdzv", Value: []byte("v")})

	code, out, errOut := session("list")
	if code != 0 {
		t.Fatalf("session list: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "ID  TTL  REMAINING  AGE") || !strings.Contains(out, "TASKS") || !strings.Contains(out, "2 sessions") {
		t.Errorf("session list:\n%s", out)
	}
	if f := strings.Fields(lineWith(out, fmt.Sprintf("%d  ", busy))); len(f) < 7 || f[1] != "10s" || f[2] != "10s" || f[4] != "1" || f[5] != "(default/1)" || f[6] != "1" {
		t.Errorf("the busy session's line %q in:\n%s", f, out)
	}
	if f := strings.Fields(lineWith(out, fmt.Sprintf("%d  ", idle))); len(f) != 6 || f[1] != "3s" || f[4] != "-" || f[5] != "0" {
		t.Errorf("the idle session's line %q in:\n%s", f, out)
	}
	code, out, errOut = session("list", "--json")
	var list rpc.SessionsResponse
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list.Sessions) != 2 || list.Sessions[0].Session != busy ||
		len(list.Sessions[0].Tasks) != 1 || list.Sessions[0].Keys != 1 {
		t.Fatalf("session list --json: exit %d, %v: %s%s", code, err, out, errOut)
	}

	if code, out, errOut := session("close", fmt.Sprint(busy)); code != 0 || out != fmt.Sprintf("session %d closed\n", busy) {
		t.Fatalf("session close: exit %d, %q, %q", code, out, errOut)
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Todo != 2 || st.Held != 0 || local.FSM().KV(fsm.DefaultJob, "rdzv").Found {
		t.Fatalf("after the close: %+v; the attached key is still there: %v", st, local.FSM().KV(fsm.DefaultJob, "rdzv").Found)
	}
	if code, out, errOut := session("close", fmt.Sprint(busy)); code != 0 || !strings.Contains(out, "had ended already") {
		t.Fatalf("second close: exit %d, %q, %q", code, out, errOut)
	}
	for _, args := range [][]string{{"close"}, {"close", "abc"}, {"close", "0"}, {"close", "1", "2"}} {
		if code, _, errOut := session(args...); code == 0 || !strings.Contains(errOut, "session ID") {
			t.Errorf("session %q: exit %d, %q", args, code, errOut)
		}
	}
}
