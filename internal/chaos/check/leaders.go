package check

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// LeaderClaim is one node's claim to have won the election of a Raft term.
type LeaderClaim struct {
	Node string `json:"node"`
	Term uint64 `json:"term"`
	// Source says where the claim was read (file and line), for the report.
	Source string `json:"source,omitempty"`
}

// electionWon is the message hashicorp/raft logs, at info level, when a
// candidate has counted a quorum of votes; the line carries the term of the
// election (term=N). It is written on Raft's main goroutine before the node
// switches to the leader state, so no node ever acts as leader of a term
// without having written it.
const electionWon = "election won"

var (
	// textElectionWon matches hclog's text format when the message itself
	// is electionWon: "<time> [INFO]  <logger name>: election won: term=5
	// tally=2", and not a line that quotes the words in some value.
	textElectionWon = regexp.MustCompile(`^\S+ +\[[A-Z]+\] +(?:[^ :]+: )?` + electionWon + `:(.*)$`)
	termField       = regexp.MustCompile(`(?:^| )term=(\d+)(?: |$)`)
)

// ParseLeaderClaims reads a node's log (hclog text or JSON lines) and returns
// a claim for every "election won" line in it, in order. name labels the
// claims' Source. A line that reports a won election without a readable term
// is an error rather than skipped: a claim the check cannot see would let a
// second leader pass unnoticed.
func ParseLeaderClaims(node, name string, r io.Reader) ([]LeaderClaim, error) {
	return ParseLeaderClaimsFrom(node, name, 1, r)
}

// ParseLeaderClaimsFrom is ParseLeaderClaims for a part of a log file that
// starts at line first of it: one incarnation of a node whose volume was
// replaced, which appended to the same file as the one before it.
func ParseLeaderClaimsFrom(node, name string, first int, r io.Reader) ([]LeaderClaim, error) {
	var claims []LeaderClaim
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for line := first; sc.Scan(); line++ {
		text := sc.Text()
		if !strings.Contains(text, electionWon) {
			continue
		}
		term, ok, err := parseElectionWon(text)
		if err != nil {
			return claims, fmt.Errorf("%s:%d: %v: %q", name, line, err, text)
		}
		if ok {
			claims = append(claims, LeaderClaim{Node: node, Term: term, Source: fmt.Sprintf("%s:%d", name, line)})
		}
	}
	if err := sc.Err(); err != nil {
		return claims, fmt.Errorf("%s: %w", name, err)
	}
	return claims, nil
}

// parseElectionWon returns the term of an "election won" log line; ok is
// false for a line that merely mentions the words (say, inside another
// message's value).
func parseElectionWon(text string) (term uint64, ok bool, err error) {
	if strings.HasPrefix(strings.TrimSpace(text), "{") {
		// --log-json: {"@message":"election won","term":5,...}
		var m struct {
			Message string          `json:"@message"`
			Term    json.RawMessage `json:"term"`
		}
		if json.Unmarshal([]byte(text), &m) != nil || m.Message != electionWon {
			return 0, false, nil
		}
		t, err := strconv.ParseUint(strings.Trim(string(m.Term), `"`), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("election won without a term")
		}
		return t, true, nil
	}
	// Text: "... [INFO]  n1.raft: election won: term=5 tally=2".
	m := textElectionWon.FindStringSubmatch(text)
	if m == nil {
		return 0, false, nil
	}
	sub := termField.FindStringSubmatch(m[1])
	if sub == nil {
		return 0, false, fmt.Errorf("election won without a term")
	}
	t, err := strconv.ParseUint(sub[1], 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("election won with term %q: %v", sub[1], err)
	}
	return t, true, nil
}

// OneLeaderPerTerm checks Raft's election safety, as hashicorp/raft's fuzzy
// verifier does: in every term at most one node won the election. The same
// node claiming a term more than once (say, winning it again after a
// restart) is still one leader and not a violation; two distinct nodes in
// one term are, whether or not they led at the same moment: entries are
// identified by (index, term), so two leaders of one term can write
// different entries that followers take for the same one. Every such term
// is reported with its nodes and where each claim was read.
func OneLeaderPerTerm(claims []LeaderClaim) error {
	v := &violations{name: "one leader per term"}
	byTerm := map[uint64][]LeaderClaim{}
	for _, c := range claims {
		byTerm[c.Term] = append(byTerm[c.Term], c)
	}
	terms := make([]uint64, 0, len(byTerm))
	for t := range byTerm {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	for _, t := range terms {
		// The first claim of each node, in the order they were given.
		var first []LeaderClaim
		for _, c := range byTerm[t] {
			if !slices.ContainsFunc(first, func(f LeaderClaim) bool { return f.Node == c.Node }) {
				first = append(first, c)
			}
		}
		if len(first) < 2 {
			continue
		}
		var who []string
		for _, c := range first {
			s := c.Node
			if c.Source != "" {
				s += " (" + c.Source + ")"
			}
			who = append(who, s)
		}
		v.add("term %d has %d leaders: %s", t, len(first), strings.Join(who, ", "))
	}
	return v.err()
}
