package check

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

// The register store's writes, answered: kvCmpValue swapped or not (the
// key answered at cur, curVersion; absent when curVersion is 0),
// kvDelete deleted or not, and so on.
func kvCompareValue(c int, inv, ret int64, key, expect, value string, swapped bool, cur string, curVersion uint64) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: history.KVCompareValue, Invoke: i, Return: r, Key: key, ExpectValue: expect, Value: value,
		Swapped: swapped, Found: curVersion != 0, Read: cur, Version: curVersion}
}

func kvDelete(c int, inv, ret int64, key string, expect uint64, deleted bool, version uint64) history.Op {
	i, r := rt(inv, ret)
	op := history.Op{Client: c, Kind: history.KVDelete, Invoke: i, Return: r, Key: key, Expect: expect,
		Found: version != 0, Version: version}
	if deleted {
		op.Number = 1
	}
	return op
}

func kvDeletePrefix(c int, inv, ret int64, prefix string, deleted int64) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: history.KVDeletePrefix, Invoke: i, Return: r, Key: prefix, Number: deleted}
}

func kvAdd(c int, inv, ret int64, key string, amount, sum int64, version uint64) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: history.KVAdd, Invoke: i, Return: r, Key: key, Amount: amount, Number: sum, Version: version}
}

func kvAppend(c int, inv, ret int64, key, value string, length int64, version uint64) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: history.KVAppend, Invoke: i, Return: r, Key: key, Value: value, Number: length, Version: version}
}

func kvMultiSet(c int, inv, ret int64, keys, values []string, versions ...uint64) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: history.KVMultiSet, Invoke: i, Return: r, Keys: keys, Values: values, Versions: versions}
}

// unknownOutcome makes op's outcome unknown.
func unknownOutcome(op history.Op) history.Op {
	return history.Op{Client: op.Client, Kind: op.Kind, Invoke: op.Invoke, Return: history.Never, Key: op.Key, Expect: op.Expect,
		ExpectValue: op.ExpectValue, Value: op.Value, Amount: op.Amount, Keys: op.Keys, Values: op.Values}
}

func kvStoreLinearizable(t *testing.T) func([]history.Op) error {
	return func(o []history.Op) error {
		cfg := testCfg
		cfg.VisualizeDir = t.TempDir()
		res, err := KVLinearizable(o, cfg, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome == porcupine.Unknown {
			t.Fatal("the check timed out")
		}
		return res.Err()
	}
}

func TestKVStoreLinearizable(t *testing.T) {
	runErrCases(t, kvStoreLinearizable(t), []errCase{
		{name: "clean: compare-values", ops: ops(
			kvCompareValue(0, 0, 1, "k0", "", "a", true, "a", 3),
			kvCompareValue(1, 2, 3, "k0", "a", "b", true, "b", 4),
			kvCompareValue(2, 4, 5, "k0", "a", "c", false, "b", 4),
			kvGet(0, 6, 7, "k0", "b", 4),
		)},
		{name: "clean: deletes", ops: ops(
			kvSwap(0, 0, 1, "k0", 0, "a", 1),
			kvDelete(1, 2, 3, "k0", 9, false, 1), // not at version 9
			kvDelete(1, 4, 5, "k0", 1, true, 1),
			kvDelete(1, 6, 7, "k0", 0, false, 0), // absent
			kvGet(2, 8, 9, "k0", "", 0),
			kvSwap(0, 10, 11, "k0", 0, "b", 5),
		)},
		{name: "clean: adds, appends and a set", ops: ops(
			kvAdd(0, 0, 1, "n0", 5, 5, 1),
			kvAdd(1, 2, 3, "n0", -2, 3, 2),
			kvGet(2, 4, 5, "n0", "3", 2),
			kvAppend(0, 6, 7, "k1", "ab", 2, 3),
			kvAppend(1, 8, 9, "k1", "c", 3, 4),
			kvGet(2, 10, 11, "k1", "abc", 4),
			kvMultiSet(0, 12, 13, []string{"k0", "k1"}, []string{"x", "y"}, 5, 6),
			kvGet(2, 14, 15, "k0", "x", 5),
			kvGet(2, 14, 15, "k1", "y", 6),
		)},
		{name: "clean: a prefix delete clears the keys under it", ops: ops(
			kvSwap(0, 0, 1, "k0", 0, "a", 1),
			kvSwap(0, 0, 1, "k1", 0, "b", 2),
			kvAdd(0, 0, 1, "n0", 1, 1, 3),
			kvDeletePrefix(1, 2, 3, "k", 2),
			kvGet(2, 4, 5, "k0", "", 0),
			kvGet(2, 4, 5, "k1", "", 0),
			kvGet(2, 4, 5, "n0", "1", 3),
			kvDeletePrefix(1, 6, 7, "k", 0),
		)},
		{name: "clean: writes of unknown outcome, seen applied or not", ops: ops(
			kvAdd(0, 0, 1, "n0", 5, 5, 1),
			unknownOutcome(kvAdd(1, 2, 3, "n0", 5, 0, 0)),
			kvGet(2, 4, 5, "n0", "10", 7),
			unknownOutcome(kvAppend(1, 6, 7, "k1", "z", 0, 0)),
			kvGet(2, 8, 9, "k1", "", 0),
			unknownOutcome(kvMultiSet(1, 10, 11, []string{"k0", "k1"}, []string{"p", "q"})),
			kvGet(2, 12, 13, "k0", "p", 9),
			unknownOutcome(kvDelete(1, 14, 15, "k0", 0, false, 0)),
			kvGet(2, 16, 17, "k0", "", 0),
		)},
		{name: "an add applied twice", ops: ops(
			kvAdd(0, 0, 1, "n0", 5, 5, 1),
			kvGet(2, 4, 5, "n0", "10", 2),
		), want: []string{`key "n0"`, `read "10" at version 2, but the key is "5" at version 1`}},
		{name: "an add answered a wrong sum", ops: ops(
			kvAdd(0, 0, 1, "n0", 5, 5, 1),
			kvAdd(0, 2, 3, "n0", 5, 5, 2),
		), want: []string{"added 5 and answered the sum 5"}},
		{name: "a deleted key read back", ops: ops(
			kvSwap(0, 0, 1, "k0", 0, "a", 1),
			kvDelete(1, 2, 3, "k0", 0, true, 1),
			kvGet(2, 4, 5, "k0", "a", 1),
		), want: []string{`read "a" at version 1, but the key is absent`}},
		{name: "a compare-value swapped from another value", ops: ops(
			kvSwap(0, 0, 1, "k0", 0, "a", 1),
			kvCompareValue(1, 2, 3, "k0", "z", "b", true, "b", 2),
		), want: []string{`swapped from "z", but the key is "a" at version 1`}},
		{name: "a set lost on one key", ops: ops(
			kvSwap(0, 0, 1, "k1", 0, "a", 1),
			kvMultiSet(0, 2, 3, []string{"k0", "k1"}, []string{"x", "y"}, 5, 6),
			kvGet(2, 4, 5, "k1", "a", 1),
		), want: []string{`key "k1"`}},
		{name: "a prefix delete that deleted nothing while a key was under it", ops: ops(
			kvSwap(0, 0, 1, "k1", 0, "a", 1),
			kvDeletePrefix(1, 2, 3, "k", 0),
		), want: []string{"the prefix delete deleted no key"}},
		{name: "an append answered a wrong length", ops: ops(
			kvAppend(0, 0, 1, "k1", "ab", 2, 3),
			kvAppend(0, 2, 3, "k1", "c", 1, 4),
		), want: []string{"appended 1 bytes and answered the length 1"}},
	})
}

func TestKVStoreVersionsUnique(t *testing.T) {
	runErrCases(t, KVVersionsUnique, []errCase{
		{name: "clean", ops: ops(
			kvAdd(0, 0, 1, "n0", 5, 5, 1),
			kvMultiSet(0, 2, 3, []string{"k0", "k1"}, []string{"x", "y"}, 2, 3),
			kvGet(1, 4, 5, "k1", "y", 3),
			kvDelete(1, 6, 7, "k0", 0, true, 2),
			kvAppend(0, 8, 9, "k1", "z", 2, 4),
		)},
		{name: "an add and a set stored one version", ops: ops(
			kvAdd(0, 0, 1, "n0", 5, 5, 2),
			kvMultiSet(0, 2, 3, []string{"k0", "k1"}, []string{"x", "y"}, 2, 3),
		), want: []string{"both stored version 2"}},
		{name: "a delete names another key's version", ops: ops(
			kvMultiSet(0, 2, 3, []string{"k0", "k1"}, []string{"x", "y"}, 2, 3),
			kvDelete(1, 6, 7, "k0", 0, true, 3),
		), want: []string{`version 3 is "k1" = "y"`, `but "k0" = (value unreported)`}},
	})
}
