package cli

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestMemberList: cluster member list shows each member's id, name, role
// (voter or nonvoter) and addresses, the leader marked, as a table or as
// JSON.
func TestMemberList(t *testing.T) {
	var members []rpc.Member
	m := &member{Local: apitest.NewLocal(), members: &members}
	ts := httptest.NewServer(httpapi.NewHandler(m, httpapi.Config{}, nil))
	t.Cleanup(ts.Close)
	addr := strings.TrimPrefix(ts.URL, "http://")
	m.ID = "n1~8c1e0a"
	m.st = rpc.StatusResponse{NodeID: m.ID, APIAddr: addr, State: "Leader", Ready: true}
	members = []rpc.Member{
		{ID: "n1~8c1e0a", Name: "n1", APIAddr: addr, RaftAddr: "10.0.0.1:7000", Suffrage: "Voter", Leader: true},
		{ID: "n2~33d0f1", Name: "n2", RaftAddr: "10.0.0.2:7000", Suffrage: "Voter"},
		{ID: "n4~5b7a90", Name: "n4", RaftAddr: "10.0.0.4:7000", Suffrage: "Nonvoter"},
	}

	code, out, errOut := runCLI("cluster", "member", "list", "--addr", addr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 4 {
		t.Fatalf("member list: exit %d:\n%s%s", code, out, errOut)
	}
	for i, want := range [][]string{
		{"ID", "NAME", "ROLE", "RAFT ADDR", "API ADDR", "LEADER"},
		{"n1~8c1e0a", "n1", "voter", "10.0.0.1:7000", addr, "*"},
		{"n2~33d0f1", "n2", "voter", "10.0.0.2:7000", " -"},
		{"n4~5b7a90", "n4", "nonvoter", "10.0.0.4:7000"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("no %q in row %d: %q", w, i, lines[i])
			}
		}
		if i > 1 && strings.Contains(lines[i], "*") {
			t.Errorf("row %d marked the leader: %q", i, lines[i])
		}
	}

	for _, args := range [][]string{{"--json"}, {"-o", "json", "--stale"}} {
		code, out, errOut = runCLI(append([]string{"cluster", "member", "list", "--addr", addr}, args...)...)
		var got memberList
		if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
			t.Fatalf("member list %q: exit %d, %v:\n%s%s", args, code, err, out, errOut)
		}
		want := []memberRow{
			{ID: "n1~8c1e0a", Name: "n1", Role: "voter", RaftAddr: "10.0.0.1:7000", APIAddr: addr, Leader: true},
			{ID: "n2~33d0f1", Name: "n2", Role: "voter", RaftAddr: "10.0.0.2:7000"},
			{ID: "n4~5b7a90", Name: "n4", Role: "nonvoter", RaftAddr: "10.0.0.4:7000"},
		}
		if len(got.Members) != len(want) {
			t.Fatalf("member list %q: %+v", args, got)
		}
		for i := range want {
			if got.Members[i] != want[i] {
				t.Errorf("member list %q: member %d is %+v, want %+v", args, i, got.Members[i], want[i])
			}
		}
	}
	if code, _, errOut := runCLI("cluster", "member", "list", "--addr", addr, "n1"); code == 0 || !strings.Contains(errOut, "takes no arguments") {
		t.Errorf("member list with an argument: exit %d: %s", code, errOut)
	}
}

// TestMemberCommandsEarlierNames: cluster join and cluster remove, the
// earlier names of cluster member add and remove, are still commands,
// hidden from the help, which names the member commands.
func TestMemberCommandsEarlierNames(t *testing.T) {
	code, out, errOut := runCLI("cluster", "--help")
	if code != 0 || !strings.Contains(out, "member") || strings.Contains(out, "join") {
		t.Errorf("cluster --help: exit %d, want member and no join:\n%s%s", code, out, errOut)
	}
	for _, tc := range []struct{ earlier, now []string }{
		{[]string{"cluster", "join"}, []string{"cluster", "member", "add"}},
		{[]string{"cluster", "remove"}, []string{"cluster", "member", "remove"}},
	} {
		code, out, errOut := runCLI(append(tc.earlier, "--help")...)
		if code != 0 || !strings.Contains(out, "the earlier name of "+strings.Join(tc.now, " ")) {
			t.Errorf("%q --help: exit %d:\n%s%s", tc.earlier, code, out, errOut)
		}
		// Both names read the same flags and arguments.
		for _, cmd := range [][]string{tc.earlier, tc.now} {
			code, _, errOut := runCLI(cmd...)
			if code == 0 || !(strings.Contains(errOut, `Required flags "id, raft-addr, api-addr"`) || strings.Contains(errOut, "want exactly one member")) {
				t.Errorf("%q without its flags or argument: exit %d: %s", cmd, code, errOut)
			}
		}
	}
}
