package check

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
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

// kvKind is what a register operation does to one key.
type kvKind uint8

const (
	kvRead     kvKind = iota // KVGet
	kvCAS                    // KVCAS
	kvCmpValue               // KVCompareValue
	kvDel                    // KVDelete
	kvClear                  // KVDeletePrefix, on one key it covers
	kvAddTo                  // KVAdd
	kvAppendTo               // KVAppend
	kvSet                    // KVMultiSet, on one of its keys
)

var kvKindNames = [...]string{"kv_get", "kv_cas", "kv_compare_value", "kv_delete", "kv_delete_prefix", "kv_add", "kv_append", "kv_multi_set"}

// kvOp is a register operation on one key, the porcupine input: a
// KVDeletePrefix or a KVMultiSet is one per key it covers.
type kvOp struct {
	idx         int // index in the history
	kind        kvKind
	key         string
	expect      uint64 // cas: the version expected; del: the version to delete, 0 for any
	expectValue string // cmpValue: the value expected, "" for absent
	value       string // cas, cmpValue, set: the value to store; appendTo: the bytes appended
	amount      int64  // addTo
	unknown     bool   // a write whose outcome is unknown
	failed      bool   // a write refused with an error code, so it changed nothing
	swapped     bool   // cas, cmpValue: swapped; del: deleted
	// The key as the answer reported it: its value and version after a
	// swap, an add, an append or a set; as it was after one that did
	// not swap, and when a delete ran (the value unreported).
	found   bool
	read    string
	version uint64
	number  int64 // addTo: the sum; appendTo: the length; clear: the keys the prefix delete deleted
	// bad says what is wrong with an answer the model cannot take.
	bad string
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
	keys := kvKeys(ops)
	for i, op := range ops {
		ins, ok := toKVOps(i, op, keys)
		if !ok {
			continue
		}
		if op.Invoke > op.Return {
			return res, fmt.Errorf("register linearizability: %s returns before it is invoked", describe(i, op))
		}
		ret := op.Return
		switch {
		case unknown(op) && ins[0].kind == kvRead:
			continue // a read whose answer was lost changed nothing
		case unknown(op):
			ret = history.Never // it may take effect after the client gave up
		case op.Code != "" && ins[0].kind == kvRead:
			continue
		}
		for _, in := range ins {
			hist = append(hist, porcupine.Operation{ClientId: max(op.Client, 0), Input: in, Call: op.Invoke, Return: ret})
		}
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

// kvKeys returns the keys the register operations of ops name (not the
// prefixes), sorted: those a prefix delete may have deleted.
func kvKeys(ops []history.Op) []string {
	var keys []string
	for _, op := range ops {
		switch op.Kind {
		case history.KVGet, history.KVCAS, history.KVCompareValue, history.KVDelete, history.KVAdd, history.KVAppend:
			keys = append(keys, op.Key)
		case history.KVMultiSet:
			keys = append(keys, op.Keys...)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// toKVOps converts a register operation to the model's operations, one
// per key it covers (a prefix delete covers those of keys under its
// prefix), or reports that op is none.
func toKVOps(i int, op history.Op, keys []string) ([]kvOp, bool) {
	in := kvOp{idx: i, key: op.Key, expect: op.Expect, value: op.Value}
	switch op.Kind {
	case history.KVGet:
		in.kind = kvRead
	case history.KVCAS:
		in.kind = kvCAS
	case history.KVCompareValue:
		in.kind, in.expectValue = kvCmpValue, op.ExpectValue
	case history.KVDelete:
		in.kind = kvDel
	case history.KVDeletePrefix:
		in.kind = kvClear
	case history.KVAdd:
		in.kind, in.amount = kvAddTo, op.Amount
	case history.KVAppend:
		in.kind = kvAppendTo
	case history.KVMultiSet:
		in.kind = kvSet
	default:
		return nil, false
	}
	switch {
	case unknown(op):
		in.unknown = true
	case op.Code != "":
		in.failed = true
	default:
		in.swapped, in.found, in.read, in.version, in.number = op.Swapped, op.Found, op.Read, op.Version, op.Number
		if in.kind == kvDel {
			in.swapped = op.Number == 1
		}
	}
	switch in.kind {
	case kvClear:
		var out []kvOp
		for _, k := range keys {
			if strings.HasPrefix(k, op.Key) {
				c := in
				c.key = k
				out = append(out, c)
			}
		}
		return out, len(out) > 0
	case kvSet:
		out := make([]kvOp, len(op.Keys))
		for j, k := range op.Keys {
			c := in
			c.key = k
			if j < len(op.Values) {
				c.value = op.Values[j]
			}
			switch {
			case c.unknown || c.failed:
			case len(op.Versions) != len(op.Keys) || len(op.Values) != len(op.Keys):
				c.bad = fmt.Sprintf("a set of %d keys and %d values answered %d versions", len(op.Keys), len(op.Values), len(op.Versions))
			default:
				c.found, c.read, c.version = true, c.value, op.Versions[j]
			}
			out[j] = c
		}
		return out, len(out) > 0
	}
	return []kvOp{in}, true
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
	case in.bad != "":
		return nil, in.bad
	case in.kind == kvRead:
		if !s.reports(in.found, in.read, in.version) {
			return nil, "read " + describeKVState(answered) + ", but the key is " + describeKVState(s)
		}
		return []any{answered}, ""
	case in.failed:
		return []any{s}, ""
	case in.unknown:
		// Applied at some moment after its invoke, or never.
		if next, ok := kvApply(s, in); ok {
			return []any{s, next}, ""
		}
		return []any{s}, ""
	}
	switch in.kind {
	case kvCAS:
		if in.swapped {
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
	case kvCmpValue:
		if in.swapped {
			if !s.holds(in.expectValue) {
				return nil, fmt.Sprintf("swapped from %s, but the key is %s", describeExpected(in.expectValue), describeKVState(s))
			}
			if !in.found || in.read != in.value || in.version <= s.version {
				return nil, fmt.Sprintf("swapped, but the answer is %s: it must be the value stored, at a version above %d",
					describeKVState(answered), s.version)
			}
			return []any{answered}, ""
		}
		if !s.reports(in.found, in.read, in.version) {
			return nil, "did not swap and answered " + describeKVState(answered) + ", but the key is " + describeKVState(s)
		}
		if s.holds(in.expectValue) {
			return nil, fmt.Sprintf("did not swap, but the key is %s, which is %s", describeKVState(s), describeExpected(in.expectValue))
		}
		return []any{answered}, ""
	case kvDel:
		switch {
		case in.swapped:
			if !in.found || in.expect != 0 && in.version != in.expect || !s.found || !s.at(in.version) {
				return nil, fmt.Sprintf("deleted at version %d (expecting %d), but the key is %s", in.version, in.expect, describeKVState(s))
			}
			return []any{kvState{}}, ""
		case !in.found:
			if s.found {
				return nil, "deleted nothing, the key absent, but the key is " + describeKVState(s)
			}
			return []any{s}, ""
		case in.expect == 0 || in.version == in.expect || !s.found || !s.at(in.version):
			return nil, fmt.Sprintf("deleted nothing, the key at version %d (expecting %d), but the key is %s", in.version, in.expect, describeKVState(s))
		}
		return []any{kvState{found: true, value: s.value, version: in.version}}, ""
	case kvClear:
		if in.number == 0 && s.found {
			return nil, "the prefix delete deleted no key, but the key is " + describeKVState(s)
		}
		return []any{kvState{}}, ""
	}
	// An add, an append or a set: the answer says what it stored, at
	// which version.
	next, ok := kvApply(s, in)
	if !ok {
		return nil, fmt.Sprintf("added to the key, but it is %s, not a decimal integer", describeKVState(s))
	}
	switch {
	case in.kind == kvAddTo && next.value != strconv.FormatInt(in.number, 10):
		return nil, fmt.Sprintf("added %d and answered the sum %d, but the key is %s", in.amount, in.number, describeKVState(s))
	case in.kind == kvAppendTo && int64(len(next.value)) != in.number:
		return nil, fmt.Sprintf("appended %d bytes and answered the length %d, but the key is %s", len(in.value), in.number, describeKVState(s))
	case in.version <= s.version:
		return nil, fmt.Sprintf("stored at version %d, but the key is %s: a write takes a version above", in.version, describeKVState(s))
	}
	next.version, next.above = in.version, false
	return []any{next}, ""
}

// kvApply returns the state after write in takes effect on s (a version
// above s's, which the answer fixes), false when it cannot take effect.
func kvApply(s kvState, in kvOp) (kvState, bool) {
	stored := func(v string) kvState { return kvState{found: true, value: v, version: s.version, above: true} }
	switch in.kind {
	case kvCAS:
		next := stored(in.value)
		next.version = max(s.version, in.expect)
		return next, s.at(in.expect)
	case kvCmpValue:
		return stored(in.value), s.holds(in.expectValue)
	case kvDel:
		return kvState{}, s.found && (in.expect == 0 || s.at(in.expect))
	case kvClear:
		return kvState{}, true
	case kvAddTo:
		var base int64
		if s.found {
			b, err := strconv.ParseInt(s.value, 10, 64)
			if err != nil {
				return s, false
			}
			base = b
		}
		return stored(strconv.FormatInt(base+in.amount, 10)), true
	case kvAppendTo:
		return stored(s.value + in.value), true
	case kvSet:
		return stored(in.value), true
	}
	return s, false
}

// holds reports whether a compare-value expecting expected ("" for
// absent) would swap on s.
func (s kvState) holds(expected string) bool {
	if !s.found {
		return expected == ""
	}
	return s.value == expected
}

func describeExpected(expected string) string {
	if expected == "" {
		return "absent (or empty)"
	}
	return strconv.Quote(expected)
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
	fmt.Fprintf(&b, "#%d %s(%q", in.idx, kvKindNames[in.kind], in.key)
	switch in.kind {
	case kvRead:
		fmt.Fprintf(&b, ") -> %s", describeKVState(kvState{found: in.found, value: in.read, version: in.version}))
		return b.String()
	case kvCAS:
		fmt.Fprintf(&b, ", %d, %q) -> ", in.expect, in.value)
	case kvCmpValue:
		fmt.Fprintf(&b, ", %s, %q) -> ", describeExpected(in.expectValue), in.value)
	case kvDel:
		fmt.Fprintf(&b, ", %d) -> ", in.expect)
	case kvClear:
		b.WriteString(" under a prefix) -> ")
	case kvAddTo:
		fmt.Fprintf(&b, ", %d) -> ", in.amount)
	case kvAppendTo, kvSet:
		fmt.Fprintf(&b, ", %q) -> ", in.value)
	}
	answered := kvState{found: in.found, value: in.read, version: in.version}
	switch {
	case in.unknown:
		b.WriteString("unknown")
	case in.failed:
		b.WriteString("refused")
	case in.kind == kvCAS && in.swapped, in.kind == kvCmpValue && in.swapped:
		fmt.Fprintf(&b, "swapped, version %d", in.version)
	case in.kind == kvCAS, in.kind == kvCmpValue:
		b.WriteString("not swapped, key " + describeKVState(answered))
	case in.kind == kvDel && in.swapped:
		fmt.Fprintf(&b, "deleted version %d", in.version)
	case in.kind == kvDel && in.found:
		fmt.Fprintf(&b, "not deleted, key at version %d", in.version)
	case in.kind == kvDel:
		b.WriteString("not deleted, key absent")
	case in.kind == kvClear:
		fmt.Fprintf(&b, "%d keys deleted", in.number)
	case in.kind == kvAddTo:
		fmt.Fprintf(&b, "sum %d, version %d", in.number, in.version)
	case in.kind == kvAppendTo:
		fmt.Fprintf(&b, "length %d, version %d", in.number, in.version)
	default:
		fmt.Fprintf(&b, "version %d", in.version)
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
// writes (swaps, adds, appends, sets) report the same version, and every
// answer that reports a key at a version (a read, a write, a refused
// compare-and-set, a delete) names the same key for it, and the same
// value when both say it.
func KVVersionsUnique(ops []history.Op) error {
	v := &violations{name: "register versions unique"}
	type fact struct {
		version    uint64
		key, value string
		hasValue   bool
		write      bool
	}
	type seen struct {
		idx int
		fact
	}
	writes := map[uint64]int{}
	byVersion := map[uint64]seen{}
	for i, op := range ops {
		if !succeeded(op) {
			continue
		}
		var facts []fact
		switch op.Kind {
		case history.KVGet, history.KVCAS, history.KVCompareValue:
			if op.Found {
				facts = append(facts, fact{op.Version, op.Key, op.Read, true, op.Kind != history.KVGet && op.Swapped})
			}
		case history.KVDelete:
			if op.Found {
				facts = append(facts, fact{version: op.Version, key: op.Key})
			}
		case history.KVAdd:
			facts = append(facts, fact{op.Version, op.Key, strconv.FormatInt(op.Number, 10), true, true})
		case history.KVAppend:
			facts = append(facts, fact{version: op.Version, key: op.Key, write: true})
		case history.KVMultiSet:
			for j, k := range op.Keys {
				if j < len(op.Versions) && j < len(op.Values) {
					facts = append(facts, fact{op.Versions[j], k, op.Values[j], true, true})
				}
			}
		}
		for _, f := range facts {
			if f.version == 0 {
				continue
			}
			if f.write {
				if j, ok := writes[f.version]; ok && j != i {
					v.add("%s and %s both stored version %d", describe(j, ops[j]), describe(i, op), f.version)
				} else {
					writes[f.version] = i
				}
			}
			w, ok := byVersion[f.version]
			switch {
			case !ok:
				byVersion[f.version] = seen{i, f}
			case w.key != f.key || w.hasValue && f.hasValue && w.value != f.value:
				v.add("version %d is %q = %s in %s, but %q = %s in %s", f.version, w.key, describeValue(w.value, w.hasValue), describe(w.idx, ops[w.idx]),
					f.key, describeValue(f.value, f.hasValue), describe(i, op))
			case !w.hasValue && f.hasValue:
				byVersion[f.version] = seen{i, f}
			}
		}
	}
	return v.err()
}

func describeValue(value string, known bool) string {
	if !known {
		return "(value unreported)"
	}
	return strconv.Quote(value)
}
