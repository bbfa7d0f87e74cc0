package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/raftmaster/raftmaster/internal/chaos/check"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// leaderClaims reads every election won during the run from the nodes' log
// files.
//
// The logs, not polling, are the source because they are complete: Raft
// writes "election won: term=N" for every election a node wins, on its
// main goroutine and before it acts as leader, and proccluster opens a
// node's log for appending at every start, so the lines of a process that
// was killed and restarted are all still there. Polling GET /v1/status
// would miss a term that ends between two polls (a leader killed or cut off
// right after winning, a contested election it loses at once: exactly the
// terms where two leaders show up), and its state and term are two reads
// that a step-down can fall between. raftnode's own "gained leadership"
// line is not used either: it reads the term after Raft's notification is
// delivered, by which time a node that already stepped down may be in a
// later term, which would put a false claim on that term.
//
// A node whose volume was replaced (WipeNode) appends its new
// incarnation's lines to the same file: each incarnation's claims are
// made under its own server id (or "n2 (incarnation 2)" when the run did
// not learn it), since two incarnations of one node are two servers to
// Raft, and both winning a term is two leaders.
func leaderClaims(c *proccluster.Cluster, vols *volumes) ([]check.LeaderClaim, error) {
	var claims []check.LeaderClaim
	var errs []error
	for _, p := range c.Procs {
		data, err := os.ReadFile(p.LogPath)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		incs := vols.incarnations(p.ID)
		if len(incs) == 0 {
			incs = []incarnation{{id: p.ID}}
		}
		var labels []string
		for i, inc := range incs {
			end := int64(len(data))
			if i+1 < len(incs) {
				end = min(incs[i+1].logFrom, end)
			}
			from := min(inc.logFrom, end)
			label := inc.id
			if label == "" || slices.Contains(labels, label) {
				label = fmt.Sprintf("%s (incarnation %d)", p.ID, i+1)
			}
			labels = append(labels, label)
			first := 1 + bytes.Count(data[:from], []byte("\n"))
			cs, err := check.ParseLeaderClaimsFrom(label, filepath.Base(p.LogPath), first, bytes.NewReader(data[from:end]))
			claims = append(claims, cs...)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return claims, errors.Join(errs...)
}

// checkLeaders applies the one-leader-per-term check to the claims in the
// nodes' logs and returns its violations.
func checkLeaders(claims []check.LeaderClaim, readErr error) []string {
	const name = "one leader per term"
	var out []string
	if readErr != nil {
		out = append(out, name+": reading the nodes' logs: "+readErr.Error())
	}
	if len(claims) == 0 {
		// Every run elects at least one leader. Seeing none means the log
		// line changed and the check is blind, which must not pass as a
		// clean run.
		out = append(out, name+": no node's log shows a won election; has Raft's \"election won\" line changed?")
	}
	if err := check.OneLeaderPerTerm(claims); err != nil {
		out = append(out, err.Error())
	}
	return out
}
