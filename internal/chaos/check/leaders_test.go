package check

import (
	"strings"
	"testing"
)

func claim(node string, term uint64) LeaderClaim { return LeaderClaim{Node: node, Term: term} }

func TestOneLeaderPerTerm(t *testing.T) {
	cases := []struct {
		name   string
		claims []LeaderClaim
		// want lists strings the error must contain; none means no error.
		want []string
	}{
		{name: "no elections"},
		{name: "one leader per term", claims: []LeaderClaim{
			claim("n1", 2), claim("n2", 3), claim("n3", 4), claim("n1", 7),
		}},
		{name: "terms out of order", claims: []LeaderClaim{
			claim("n2", 9), claim("n1", 2), claim("n3", 5),
		}},
		{name: "same node leads term 5 twice after a restart", claims: []LeaderClaim{
			claim("n1", 4), {Node: "n2", Term: 5, Source: "n2.log:10"}, {Node: "n2", Term: 5, Source: "n2.log:80"}, claim("n3", 6),
		}},
		{name: "two nodes in term 5", claims: []LeaderClaim{
			claim("n1", 4), {Node: "n2", Term: 5, Source: "n2.log:10"}, {Node: "n3", Term: 5, Source: "n3.log:42"}, claim("n1", 6),
		}, want: []string{"one leader per term", "term 5 has 2 leaders", "n2 (n2.log:10)", "n3 (n3.log:42)"}},
		{name: "two nodes in term 5, one of them twice", claims: []LeaderClaim{
			claim("n2", 5), claim("n3", 5), claim("n2", 5),
		}, want: []string{"term 5 has 2 leaders: n2, n3"}},
		{name: "three nodes in one term and two in another", claims: []LeaderClaim{
			claim("n1", 3), claim("n2", 3), claim("n3", 3), claim("n1", 8), claim("n2", 8),
		}, want: []string{"term 3 has 3 leaders: n1, n2, n3", "term 8 has 2 leaders: n1, n2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := OneLeaderPerTerm(tc.claims)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected violation: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("violation not caught")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error lacks %q:\n%v", s, err)
				}
			}
			t.Logf("%v", err)
		})
	}
}

func TestParseLeaderClaims(t *testing.T) {
	log := strings.Join([]string{
		`2025-01-02T10:00:00.000Z [INFO]  n1.raft: entering candidate state: node="Node at 127.0.0.1:1 [Candidate]" term=2`,
		`2025-01-02T10:00:00.010Z [INFO]  n1.raft: election won: term=2 tally=2`,
		`2025-01-02T10:00:00.011Z [INFO]  n1: gained leadership: term=2`,
		`2025-01-02T10:00:05.000Z [INFO]  n1.http: request: path="/v1/x?q=election won: term=9"`,
		// After a restart the log is appended to.
		`2025-01-02T10:00:09.000Z [INFO]  n1.raft: election won: term=5 tally=3`,
		`{"@level":"info","@message":"election won","@module":"n1.raft","tally":2,"term":11}`,
		`{"@level":"info","@message":"request","path":"election won"}`,
	}, "\n")
	got, err := ParseLeaderClaims("n1", "n1.log", strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	want := []LeaderClaim{
		{Node: "n1", Term: 2, Source: "n1.log:2"},
		{Node: "n1", Term: 5, Source: "n1.log:5"},
		{Node: "n1", Term: 11, Source: "n1.log:6"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("claim %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestParseLeaderClaimsWithoutTerm(t *testing.T) {
	for _, line := range []string{
		`2025-01-02T10:00:00.010Z [INFO]  n1.raft: election won: tally=2`,
		`{"@level":"info","@message":"election won","tally":2}`,
	} {
		if _, err := ParseLeaderClaims("n1", "n1.log", strings.NewReader(line)); err == nil {
			t.Errorf("a won election without a term was skipped: %s", line)
		}
	}
}
