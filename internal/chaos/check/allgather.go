package check

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

type groupMember struct {
	group  string
	member uuid.UUID
}

// Allgather checks the successful watches of every allgather group: they
// all saw the same data, of the group's NumPeers entries; each watcher's
// entry (at its rank) is the data of one of its own joins; distinct members
// have distinct ranks; and every entry is the data of a join of the group.
//
// The joins a watcher's entry may come from are its joins of the group that
// did not definitely fail and were invoked before the group's first
// successful watch returned (the result is fixed when the group completes).
// It is not always the member's last join: a member that joins again after
// completion is answered with the completed result, which holds the data of
// its earlier join. Group ids are assumed not to be reused within a history.
func Allgather(ops []history.Op) error {
	v := &violations{name: "allgather"}
	joins := map[groupMember][]int{}
	groupJoins := map[string][]int{}
	watches := map[string][]int{}
	for i, op := range ops {
		switch op.Kind {
		case history.Join:
			if succeeded(op) || unknown(op) {
				k := groupMember{op.Group, op.Member}
				joins[k] = append(joins[k], i)
				groupJoins[op.Group] = append(groupJoins[op.Group], i)
			}
		case history.Watch:
			if succeeded(op) {
				watches[op.Group] = append(watches[op.Group], i)
			}
		}
	}
	for _, js := range joins {
		sort.SliceStable(js, func(a, b int) bool { return ops[js[a]].Invoke < ops[js[b]].Invoke })
	}
	groups := make([]string, 0, len(watches))
	for g := range watches {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		ws := watches[g]
		first := ops[ws[0]]
		completed := int64(history.Never) // the group completed before this
		for _, wi := range ws {
			completed = min(completed, ops[wi].Return)
		}
		rankOf := map[int]int{} // rank -> watch op
		for _, wi := range ws {
			w := ops[wi]
			if !slices.Equal(w.Result, first.Result) {
				v.add("group %q: %s saw %s but %s saw %s", g, describe(ws[0], first), quote(first.Result), describe(wi, w), quote(w.Result))
			}
			if w.Rank < 0 || w.Rank >= len(w.Result) {
				v.add("group %q: %s: rank %d out of range for %d entries", g, describe(wi, w), w.Rank, len(w.Result))
				continue
			}
			if o, ok := rankOf[w.Rank]; ok && ops[o].Member != w.Member {
				v.add("group %q: members %s and %s both have rank %d (%s, %s)", g, ops[o].Member, w.Member, w.Rank, describe(o, ops[o]), describe(wi, w))
			} else {
				rankOf[w.Rank] = wi
			}
			var cands []int
			for _, ji := range joins[groupMember{g, w.Member}] {
				if ops[ji].Invoke <= completed {
					cands = append(cands, ji)
				}
			}
			if len(cands) == 0 {
				v.add("group %q: %s: the member has no join invoked before the group completed (by %v)", g, describe(wi, w), time.Duration(completed))
				continue
			}
			dataOK, peersOK := false, false
			for _, ji := range cands {
				dataOK = dataOK || ops[ji].Data == w.Result[w.Rank]
				peersOK = peersOK || ops[ji].NumPeers == len(w.Result)
			}
			if !dataOK {
				v.add("group %q: %s: entry %d is %q, not the member's joined data (%s)", g, describe(wi, w), w.Rank, w.Result[w.Rank], describeAll(ops, cands))
			}
			if !peersOK {
				v.add("group %q: %s: %d entries, but the member joined for %d peers (%s)", g, describe(wi, w), len(w.Result), ops[cands[len(cands)-1]].NumPeers, describeAll(ops, cands))
			}
		}
		checked := map[string]bool{}
		for _, wi := range ws {
			for r, d := range ops[wi].Result {
				if checked[d] {
					continue
				}
				checked[d] = true
				if !slices.ContainsFunc(groupJoins[g], func(ji int) bool { return ops[ji].Data == d }) {
					v.add("group %q: entry %d, %q, is the data of no join of the group (%s)", g, r, d, describe(wi, ops[wi]))
				}
			}
		}
	}
	return v.err()
}

func describeAll(ops []history.Op, idx []int) string {
	s := ""
	for n, i := range idx {
		if n > 0 {
			s += "; "
		}
		s += fmt.Sprintf("%s with data %q", describe(i, ops[i]), ops[i].Data)
	}
	return s
}

func quote(r []string) string {
	const shown = 8
	if len(r) > shown {
		return fmt.Sprintf("%q... (%d entries)", r[:shown], len(r))
	}
	return fmt.Sprintf("%q", r)
}
