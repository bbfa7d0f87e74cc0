package check

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

// KVResult is the outcome of KVLinearizable.
type KVResult struct {
	// Outcome is porcupine.Ok, porcupine.Illegal, or porcupine.Unknown when
	// the check ran out of time.
	Outcome porcupine.CheckResult
	// Visualization is the path of porcupine's HTML visualization, written
	// when the outcome is Illegal.
	Visualization string
	// Explanation says, when the outcome is Illegal, which keys have no
	// linearization and why the operations that could come next cannot.
	Explanation string
	// Ops is the number of operations checked, Keys the number of keys.
	Ops, Keys int
	// Elapsed is how long porcupine took.
	Elapsed time.Duration
}

// Err returns nil when the register's history is linearizable, and an
// error that explains the violation, or that the check timed out,
// otherwise.
func (r KVResult) Err() error {
	return porcupineErr("register linearizability", r.Outcome, r.Visualization, r.Explanation, r.Ops, r.Elapsed)
}

// kvOp is a register operation: the porcupine input.
type kvOp struct {
	idx     int // index in the history
	cas     bool
	key     string
	expect  uint64 // cas: the version expected
	value   string // cas: the value to store
	unknown bool   // cas: the outcome is unknown
	failed  bool   // cas: refused with an error code, so it changed nothing
	swapped bool
	// The key as the answer reported it.
	found   bool
	read    string
	version uint64
}

// kvState is the model of one key. When above is set, the version is not
// known but is greater than version: the key was stored by a
// compare-and-set whose answer was lost, and the first answer that
// reports the key fixes it.
type kvState struct {
	found   bool
	value   string
	version uint64
	above   bool
}

// KVLinearizable checks the register operations of ops (KVGet and KVCAS)
// for linearizability, one key at a time, against the model described in
// the package documentation, within timeout (0 for none). The error
// reports a history it cannot check or a visualization that could not be
// written; the verdict is in the KVResult.
func KVLinearizable(ops []history.Op, cfg Config, timeout time.Duration) (KVResult, error) {
	var res KVResult
	var hist []porcupine.Operation
	for i, op := range ops {
		if op.Kind != history.KVGet && op.Kind != history.KVCAS {
			continue
		}
		if op.Invoke > op.Return {
			return res, fmt.Errorf("register linearizability: %s returns before it is invoked", describe(i, op))
		}
		in := kvOp{idx: i, cas: op.Kind == history.KVCAS, key: op.Key, expect: op.Expect, value: op.Value}
		ret := op.Return
		switch {
		case unknown(op) && !in.cas:
			continue // a read whose answer was lost changed nothing
		case unknown(op):
			in.unknown, ret = true, history.Never // it may take effect after the client gave up
		case op.Code != "" && !in.cas:
			continue
		case op.Code != "":
			in.failed = true
		default:
			in.swapped, in.found, in.read, in.version = op.Swapped, op.Found, op.Read, op.Version
		}
		hist = append(hist, porcupine.Operation{ClientId: max(op.Client, 0), Input: in, Call: op.Invoke, Return: ret})
	}
	res.Ops = len(hist)
	parts := kvPartition(hist)
	res.Keys = len(parts)
	nm := porcupine.NondeterministicModel{
		Partition: kvPartition,
		Init:      func() []any { return []any{kvState{}} },
		Step: func(state, input, _ any) []any {
			next, _ := kvStep(state.(kvState), input.(kvOp))
			return next
		},
		Hash:              hashKVState,
		DescribeOperation: func(input, _ any) string { return describeKVOp(input.(kvOp)) },
		DescribeState:     func(s any) string { return describeKVState(s.(kvState)) },
	}
	pm := nm.ToModel()
	start := time.Now()
	outcome, info := porcupine.CheckOperationsVerbose(pm, hist, timeout)
	res.Elapsed = time.Since(start)
	res.Outcome = outcome
	if outcome != porcupine.Illegal {
		return res, nil
	}
	res.Explanation = explainKV(parts, info)
	path, err := visualize(pm, info, cfg.VisualizeDir, "register linearizability", "raftmaster-kv-linearizability-*.html")
	res.Visualization = path
	return res, err
}

// kvPartition splits a register history into one partition per key, in
// key order, so that the explanation sees the partitions porcupine checked.
func kvPartition(hist []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	for _, op := range hist {
		k := op.Input.(kvOp).key
		byKey[k] = append(byKey[k], op)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([][]porcupine.Operation, len(keys))
	for i, k := range keys {
		parts[i] = byKey[k]
	}
	return parts
}

// at reports whether the key can be at version v (0: absent) in s.
func (s kvState) at(v uint64) bool {
	switch {
	case v == 0:
		return !s.found
	case s.above:
		return v > s.version
	}
	return s.found && s.version == v
}

// reports says whether an answer of (found, value, version) can describe
// s; when it can, the state it describes is s with its version fixed.
func (s kvState) reports(found bool, value string, version uint64) bool {
	if !found {
		return !s.found && version == 0 && value == ""
	}
	return s.found && s.value == value && s.at(version)
}

// kvStep returns the states that can follow s after in, or none and why.
func kvStep(s kvState, in kvOp) ([]any, string) {
	answered := kvState{found: in.found, value: in.read, version: in.version}
	switch {
	case !in.cas:
		if !s.reports(in.found, in.read, in.version) {
			return nil, "read " + describeKVState(answered) + ", but the key is " + describeKVState(s)
		}
		return []any{answered}, ""
	case in.failed:
		return []any{s}, ""
	case in.unknown:
		if !s.at(in.expect) {
			return []any{s}, ""
		}
		// Stored under some version above the expected one, or not at all.
		return []any{s, kvState{found: true, value: in.value, version: in.expect, above: true}}, ""
	case in.swapped:
		if !s.at(in.expect) {
			return nil, fmt.Sprintf("swapped at version %d, but the key is %s", in.expect, describeKVState(s))
		}
		if !in.found || in.read != in.value || in.version <= in.expect {
			return nil, fmt.Sprintf("swapped, but the answer is %s: it must be the value stored, at a version above %d",
				describeKVState(answered), in.expect)
		}
		return []any{answered}, ""
	}
	if in.version == in.expect {
		return nil, fmt.Sprintf("did not swap, but the answer is the version %d it expected", in.expect)
	}
	if !s.reports(in.found, in.read, in.version) {
		return nil, "did not swap and answered " + describeKVState(answered) + ", but the key is " + describeKVState(s)
	}
	return []any{answered}, ""
}

// hashKVState hashes a state consistently with ==.
func hashKVState(st any) uint64 {
	s := st.(kvState)
	var h uint64 = 14695981039346656037 // FNV-1a
	mix := func(b byte) {
		h ^= uint64(b)
		h *= 1099511628211
	}
	for i := 0; i < len(s.value); i++ {
		mix(s.value[i])
	}
	for v := s.version; v > 0; v >>= 8 {
		mix(byte(v))
	}
	if s.found {
		mix(1)
	}
	if s.above {
		mix(2)
	}
	return h
}

func describeKVState(s kvState) string {
	switch {
	case !s.found:
		return "absent"
	case s.above:
		return fmt.Sprintf("%q at a version above %d", s.value, s.version)
	}
	return fmt.Sprintf("%q at version %d", s.value, s.version)
}

func describeKVOp(in kvOp) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d ", in.idx)
	if !in.cas {
		fmt.Fprintf(&b, "kv_get(%q) -> %s", in.key, describeKVState(kvState{found: in.found, value: in.read, version: in.version}))
		return b.String()
	}
	fmt.Fprintf(&b, "kv_cas(%q, %d, %q) -> ", in.key, in.expect, in.value)
	switch {
	case in.unknown:
		b.WriteString("unknown")
	case in.failed:
		b.WriteString("refused")
	case in.swapped:
		fmt.Fprintf(&b, "swapped, version %d", in.version)
	default:
		b.WriteString("not swapped, key " + describeKVState(kvState{found: in.found, value: in.read, version: in.version}))
	}
	return b.String()
}

// explainKV describes each key that has no linearization: its longest
// linearizable prefix, the states it ends in, and why each operation that
// could come next cannot.
func explainKV(parts [][]porcupine.Operation, info porcupine.LinearizationInfo) string {
	partials := info.PartialLinearizations()
	var b strings.Builder
	for p, part := range parts {
		var longest []int
		if p < len(partials) {
			for _, l := range partials[p] {
				if len(l) > len(longest) || len(l) == len(longest) && slices.Compare(l, longest) < 0 {
					longest = l
				}
			}
		}
		if len(longest) == len(part) {
			continue
		}
		states := []kvState{{}}
		inPrefix := make([]bool, len(part))
		for _, id := range longest {
			inPrefix[id] = true
			var next []kvState
			for _, s := range states {
				ns, _ := kvStep(s, part[id].Input.(kvOp))
				for _, n := range ns {
					if n := n.(kvState); !slices.Contains(next, n) {
						next = append(next, n)
					}
				}
			}
			states = next
		}
		desc := make([]string, len(states))
		for i, s := range states {
			desc[i] = describeKVState(s)
		}
		fmt.Fprintf(&b, "key %q: no linearization of its %d operations; the longest linearizable prefix has %d, ending in {%s}; none of the operations that could come next can:\n",
			part[0].Input.(kvOp).key, len(part), len(longest), strings.Join(desc, " | "))
		minRet := int64(math.MaxInt64)
		for i, op := range part {
			if !inPrefix[i] {
				minRet = min(minRet, op.Return)
			}
		}
		for i, op := range part {
			if inPrefix[i] || op.Call > minRet {
				continue
			}
			in := op.Input.(kvOp)
			var whys []string
			for _, s := range states {
				if _, why := kvStep(s, in); why != "" && !slices.Contains(whys, why) {
					whys = append(whys, why)
				}
			}
			if len(whys) == 0 {
				whys = append(whys, "legal here, but no order that takes it next can be completed")
			}
			fmt.Fprintf(&b, "  %s (client %d, real time %v..%s): %s\n", describeKVOp(in), op.ClientId,
				time.Duration(op.Call), realTime(op.Return), strings.Join(whys, "; or "))
		}
	}
	return b.String()
}

// KVVersionsUnique checks that a version names one write: no two known
// swaps report the same version, and every answer that reports a key at a
// version (a read, a swap, a refused compare-and-set) names the same key
// and value for it, whatever the key.
func KVVersionsUnique(ops []history.Op) error {
	v := &violations{name: "register versions unique"}
	type write struct {
		idx        int
		key, value string
	}
	swaps := map[uint64]int{}
	seen := map[uint64]write{}
	for i, op := range ops {
		if op.Kind != history.KVGet && op.Kind != history.KVCAS || !succeeded(op) || !op.Found {
			continue
		}
		if op.Kind == history.KVCAS && op.Swapped {
			if j, ok := swaps[op.Version]; ok {
				v.add("%s and %s both stored version %d", describe(j, ops[j]), describe(i, op), op.Version)
			} else {
				swaps[op.Version] = i
			}
		}
		w, ok := seen[op.Version]
		switch {
		case !ok:
			seen[op.Version] = write{i, op.Key, op.Read}
		case w.key != op.Key || w.value != op.Read:
			v.add("version %d is %q = %q in %s, but %q = %q in %s", op.Version, w.key, w.value, describe(w.idx, ops[w.idx]),
				op.Key, op.Read, describe(i, op))
		}
	}
	return v.err()
}
