package cli

import (
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// member is a node of a fake cluster: a Local backend that reports the
// Raft state st and the configuration of members.
type member struct {
	*apitest.Local
	st      rpc.StatusResponse
	members *[]rpc.Member
}

func (m *member) Status() rpc.StatusResponse { return m.st }

func (m *member) Members(context.Context) ([]rpc.Member, error) { return *m.members, nil }

// TestClusterStatus: cluster status asks every member of the
// configuration for its own state and shows, in one table or as JSON,
// each one's state, term, indexes, lag behind the leader and version; a
// member that does not answer has a row with its error, and the command
// then fails.
func TestClusterStatus(t *testing.T) {
	var members []rpc.Member
	serve := func(id, state string, term, commit, applied uint64) string {
		m := &member{Local: apitest.NewLocal(), members: &members}
		ts := httptest.NewServer(httpapi.NewHandler(m, httpapi.Config{}, nil))
		t.Cleanup(ts.Close)
		addr := strings.TrimPrefix(ts.URL, "http://")
		m.st = rpc.StatusResponse{NodeID: id, APIAddr: addr, State: state, Term: term, LastIndex: commit, CommitIndex: commit, AppliedIndex: applied, Ready: true}
		return addr
	}
	a1 := serve("n1", "Leader", 3, 120, 120)
	a2 := serve("n2", "Follower", 3, 118, 100)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	members = []rpc.Member{
		{ID: "n1", APIAddr: a1, RaftAddr: "127.0.0.1:7001", Suffrage: "Voter"},
		{ID: "n2", APIAddr: a2, RaftAddr: "127.0.0.1:7002", Suffrage: "Voter"},
		{ID: "n3", APIAddr: dead, RaftAddr: "127.0.0.1:7003", Suffrage: "Voter"},
	}
	code, out, errOut := runCLI("cluster", "status", "--addr", a2, "--member-timeout", "1s")
	if code == 0 || !strings.Contains(errOut, "1 of 3 members did not answer") {
		t.Errorf("with a member down: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header and 3 rows:\n%s%s", out, errOut)
	}
	for i, want := range [][]string{
		{"ID", "STATE", "TERM", "COMMIT", "APPLIED", "LAG", "VERSION"},
		{"n1", "Leader *", "3", "120", " 0 "},
		{"n2", "Follower", "3", "118", "100", " 20 "},
		{"n3", "unreachable", dead},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("no %q in row %d: %q", w, i, lines[i])
			}
		}
	}
	code, out, errOut = runCLI("cluster", "status", "--addr", a1, "--member-timeout", "1s", "-o", "json")
	if code == 0 {
		t.Errorf("--json with a member down: exit 0")
	}
	var st clusterStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("not JSON (%v): %s%s", err, out, errOut)
	}
	if st.Leader.ID != "n1" || len(st.Members) != 3 || st.Members[1].Lag == nil || *st.Members[1].Lag != 20 ||
		st.Members[0].State != "Leader" || st.Members[2].Error == "" || st.Members[2].Lag != nil {
		t.Errorf("JSON: %+v", st)
	}
	// With every member up the command succeeds.
	members = members[:2]
	if code, out, errOut := runCLI("cluster", "status", "--addr", a1); code != 0 || strings.Contains(out, "unreachable") {
		t.Errorf("all up: exit %d:\n%s%s", code, out, errOut)
	}
}
