package leader

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/fsm"
)

func TestTakeOver(t *testing.T) {
	f := fsm.New()
	var clock TermClock
	var idx uint64
	var proposed []fsm.CmdType
	propose := func(_ context.Context, c fsm.Command) (*fsm.Result, error) {
		proposed = append(proposed, c.Type())
		c.Hdr().Now = clock.Now(f.Clock())
		idx++
		return f.ApplyEntry(idx, fsm.Encode(c)), nil
	}
	self := fsm.Registration{ID: "n1", RaftAddr: "r:1", APIAddr: "a:1"}
	wall := time.Unix(1_800_000_000, 0)
	to := TakeOver{FSM: f, Clock: &clock, Wall: func() time.Time { return wall }, Self: self, Grace: time.Second, Propose: propose}
	if err := to.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, ok := f.Registration("n1"); !ok || got != self {
		t.Fatalf("registry entry %+v %v, want %+v", got, ok, self)
	}
	if c := f.Clock(); c < wall.UnixNano() || c > wall.UnixNano()+int64(time.Minute) {
		t.Fatalf("a new cluster's FSM time %d, want it to start at the first leader's wall clock %d", c, wall.UnixNano())
	}
	// A second take-over (a later term) registers nothing new.
	proposed = nil
	if err := to.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(proposed) != 1 || proposed[0] != fsm.TypeLeaderGrace {
		t.Fatalf("a leader already registered proposed %v, want only the grace", proposed)
	}
	to.Grace = fsm.MaxGrace + time.Second
	if err := to.Run(context.Background()); !errors.Is(err, fsm.ErrInvalid) {
		t.Fatalf("a grace the FSM refuses: %v, want ErrInvalid", err)
	}
}

// TestTakeOverLimits: below protocol level 2 (every new cluster starts
// there), a leader brings the replicated limits to its own flags, and
// proposes nothing when they already agree.
func TestTakeOverLimits(t *testing.T) {
	f := fsm.New()
	var clock TermClock
	var idx uint64
	var proposed []fsm.CmdType
	propose := func(_ context.Context, c fsm.Command) (*fsm.Result, error) {
		proposed = append(proposed, c.Type())
		c.Hdr().Now = clock.Now(f.Clock())
		idx++
		return f.ApplyEntry(idx, fsm.Encode(c)), nil
	}
	limits := &fsm.Limits{MaxJobs: 3, JobTTL: time.Hour}
	to := TakeOver{FSM: f, Clock: &clock, Wall: time.Now, Self: fsm.Registration{ID: "n1", APIAddr: "a:1"},
		Grace: time.Second, Limits: limits, Propose: propose}
	if err := to.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.Limits(); got != limits.Effective() {
		t.Fatalf("limits after the take-over %+v, want %+v", got, limits.Effective())
	}
	proposed = nil
	if err := to.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(proposed) != 1 || proposed[0] != fsm.TypeLeaderGrace {
		t.Fatalf("a leader whose limits are in place proposed %v, want only the grace", proposed)
	}
	to.Limits = &fsm.Limits{MaxJobs: -1}
	if err := to.Run(context.Background()); !errors.Is(err, fsm.ErrInvalid) {
		t.Fatalf("limits the FSM refuses: %v, want ErrInvalid", err)
	}
}

// TestTakeOverKeepsTheLimits: from protocol level 2, a leader keeps the
// cluster's limits whatever its flags, so that a fail-over never changes
// them, and logs each limit on which its flags differ.
func TestTakeOverKeepsTheLimits(t *testing.T) {
	f := fsm.New()
	var clock TermClock
	var idx uint64
	var proposed []fsm.CmdType
	propose := func(_ context.Context, c fsm.Command) (*fsm.Result, error) {
		proposed = append(proposed, c.Type())
		c.Hdr().Now = clock.Now(f.Clock())
		idx++
		return f.ApplyEntry(idx, fsm.Encode(c)), nil
	}
	initial := &fsm.Limits{MaxJobs: 3, JobTTL: time.Hour}
	first := TakeOver{FSM: f, Clock: &clock, Wall: time.Now, Self: fsm.Registration{ID: "n1", APIAddr: "a:1"},
		Grace: time.Second, Limits: initial, Propose: propose}
	if err := first.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := propose(context.Background(), &fsm.SetProtocol{Level: fsm.Protocol2}); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	other := first
	other.Self = fsm.Registration{ID: "n2", APIAddr: "a:2"}
	other.Limits = &fsm.Limits{MaxJobs: 7, MaxKVValueBytes: 64, JobTTL: time.Hour}
	other.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	proposed = nil
	if err := other.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(proposed, fsm.TypeSetLimits) || f.Limits() != initial.Effective() {
		t.Fatalf("a later leader proposed %v, limits %+v; want the initial %+v kept", proposed, f.Limits(), initial.Effective())
	}
	for _, want := range []string{"max-jobs 7 (cluster 3)", "max-kv-value-bytes 64 (cluster 1048576)", "raftmaster limits set"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log %q does not say %q", logs.String(), want)
		}
	}
	if strings.Contains(logs.String(), "job-ttl") {
		t.Errorf("log %q names job-ttl, on which the flags agree", logs.String())
	}
	// A leader whose flags agree logs nothing.
	logs.Reset()
	other.Limits = initial
	if err := other.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 0 {
		t.Fatalf("a leader whose flags agree logged %q", logs.String())
	}
}

// TestRegisterRelease: below fsm.Protocol2 a leader registers without its
// release, which the state could not record, and once the level has risen
// Register adds it, then proposes nothing more.
func TestRegisterRelease(t *testing.T) {
	f := fsm.New()
	var clock TermClock
	var idx uint64
	var proposed []fsm.CmdType
	propose := func(_ context.Context, c fsm.Command) (*fsm.Result, error) {
		proposed = append(proposed, c.Type())
		c.Hdr().Now = clock.Now(f.Clock())
		idx++
		return f.ApplyEntry(idx, fsm.Encode(c)), nil
	}
	self := fsm.Registration{ID: "n1", RaftAddr: "r:1", APIAddr: "a:1", Version: "v1.5.0", Protocol: fsm.Protocol2}
	to := TakeOver{FSM: f, Clock: &clock, Wall: time.Now, Self: self, Grace: time.Second, Propose: propose}
	if err := to.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Registration("n1"); got != self.AtLevel(fsm.Protocol1) {
		t.Fatalf("at level 1 the leader registered %+v, want %+v", got, self.AtLevel(fsm.Protocol1))
	}
	if _, err := propose(context.Background(), &fsm.SetProtocol{Level: fsm.Protocol2}); err != nil {
		t.Fatal(err)
	}
	proposed = nil
	for range 2 {
		if err := Register(context.Background(), f, self, propose); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := f.Registration("n1"); got != self {
		t.Fatalf("at level 2 the leader's entry is %+v, want %+v", got, self)
	}
	if len(proposed) != 1 || proposed[0] != fsm.TypeRegisterNode {
		t.Fatalf("Register twice proposed %v, want one RegisterNode", proposed)
	}
}
