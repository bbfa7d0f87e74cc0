package check

import (
	"testing"

	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

// kvGet is a KVGet of key answered with value at version (absent when
// version is 0).
func kvGet(c int, inv, ret int64, key, value string, version uint64) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: history.KVGet, Invoke: i, Return: r, Key: key,
		Found: version != 0, Read: value, Version: version}
}

// kvSwap is a KVCAS of key from version expect to value, swapped at
// version.
func kvSwap(c int, inv, ret int64, key string, expect uint64, value string, version uint64) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: history.KVCAS, Invoke: i, Return: r, Key: key, Expect: expect, Value: value,
		Swapped: true, Found: true, Read: value, Version: version}
}

// kvNoSwap is a KVCAS that did not swap, answered with the key at
// (cur, curVersion); absent when curVersion is 0.
func kvNoSwap(c int, inv, ret int64, key string, expect uint64, value, cur string, curVersion uint64) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: history.KVCAS, Invoke: i, Return: r, Key: key, Expect: expect, Value: value,
		Found: curVersion != 0, Read: cur, Version: curVersion}
}

// kvCASUnknown is a KVCAS whose outcome is unknown.
func kvCASUnknown(c int, inv int64, key string, expect uint64, value string) history.Op {
	return history.Op{Client: c, Kind: history.KVCAS, Invoke: inv * ms, Return: history.Never, Key: key, Expect: expect, Value: value}
}

func kvLinearizable(t *testing.T) func([]history.Op) error {
	return func(o []history.Op) error {
		cfg := testCfg
		cfg.VisualizeDir = t.TempDir()
		res, err := KVLinearizable(o, cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.Ops != len(o) {
			t.Fatalf("checked %d of %d operations", res.Ops, len(o))
		}
		return res.Err()
	}
}

func TestKVLinearizable(t *testing.T) {
	runErrCases(t, kvLinearizable(t), []errCase{
		{name: "clean: create, race, read", ops: ops(
			kvGet(0, 0, 1, "k0", "", 0),
			kvSwap(0, 2, 3, "k0", 0, "a", 5),
			kvSwap(1, 4, 6, "k0", 5, "b", 7),
			kvNoSwap(2, 4, 7, "k0", 5, "c", "b", 7),
			kvGet(0, 8, 9, "k0", "b", 7),
		)},
		{name: "clean: concurrent swap and read may order either way", ops: ops(
			kvSwap(0, 0, 1, "k0", 0, "a", 1),
			kvSwap(1, 2, 6, "k0", 1, "b", 3),
			kvGet(2, 3, 4, "k0", "a", 1),
			kvGet(2, 5, 7, "k0", "b", 3),
		)},
		{name: "clean: keys are independent", ops: ops(
			kvSwap(0, 0, 1, "k0", 0, "a", 1),
			kvSwap(1, 0, 1, "k1", 0, "b", 2),
			kvGet(2, 2, 3, "k1", "b", 2),
			kvGet(2, 4, 5, "k0", "a", 1),
		)},
		{name: "clean: an unknown swap read later at a version it never reported", ops: ops(
			kvSwap(0, 0, 1, "k0", 0, "a", 1),
			kvCASUnknown(1, 2, "k0", 1, "b"),
			kvGet(2, 3, 4, "k0", "a", 1),
			kvGet(2, 50, 51, "k0", "b", 9),
			kvSwap(2, 52, 53, "k0", 9, "c", 10),
		)},
		{name: "clean: an unknown swap that never happened", ops: ops(
			kvCASUnknown(1, 0, "k0", 0, "b"),
			kvGet(2, 3, 4, "k0", "", 0),
			kvSwap(0, 5, 6, "k0", 0, "a", 2),
			kvGet(2, 7, 8, "k0", "a", 2),
		)},
		{name: "clean: a refused compare-and-set changes nothing", ops: ops(
			func() history.Op { o := kvNoSwap(0, 0, 1, "k0", 0, "a", "", 0); o.Code = "limit_exceeded"; return o }(),
			kvGet(1, 2, 3, "k0", "", 0),
		)},
		{name: "lost swap", want: []string{`key "k0"`, "but the key is"}, ops: ops(
			kvSwap(0, 0, 1, "k0", 0, "a", 1),
			kvGet(1, 2, 3, "k0", "", 0),
		)},
		{name: "stale read", want: []string{`read "a" at version 1`, `"b" at version 2`}, ops: ops(
			kvSwap(0, 0, 1, "k0", 0, "a", 1),
			kvSwap(0, 2, 3, "k0", 1, "b", 2),
			kvGet(1, 4, 5, "k0", "a", 1),
		)},
		{name: "two winners of one version", want: []string{"swapped at version 1"}, ops: ops(
			kvSwap(0, 0, 1, "k0", 0, "a", 1),
			kvSwap(1, 2, 5, "k0", 1, "b", 2),
			kvSwap(2, 2, 5, "k0", 1, "c", 3),
		)},
		{name: "refusal that should have swapped", want: []string{"did not swap"}, ops: ops(
			kvSwap(0, 0, 1, "k0", 0, "a", 1),
			kvNoSwap(1, 2, 3, "k0", 1, "b", "a", 1),
		)},
		{name: "refusal answering a state nobody wrote (a retry applied twice)", want: []string{"did not swap and answered"}, ops: ops(
			kvSwap(0, 0, 1, "k0", 0, "a", 1),
			kvNoSwap(1, 2, 3, "k0", 1, "b", "b", 2),
		)},
		{name: "swap to a version not above the old one", want: []string{"at a version above 5"}, ops: ops(
			kvSwap(0, 0, 1, "k0", 0, "a", 5),
			kvSwap(0, 2, 3, "k0", 5, "b", 4),
		)},
		{name: "unknown swap read at a version not above the expected one", want: []string{"but the key is"}, ops: ops(
			kvSwap(0, 0, 1, "k0", 0, "a", 5),
			kvCASUnknown(1, 2, "k0", 5, "b"),
			kvGet(2, 50, 51, "k0", "b", 5),
		)},
		{name: "read of a value nobody wrote", want: []string{`read "z"`}, ops: ops(
			kvGet(0, 0, 1, "k0", "z", 3),
		)},
	})
}

func TestKVVersionsUnique(t *testing.T) {
	runErrCases(t, KVVersionsUnique, []errCase{
		{name: "clean", ops: ops(
			kvSwap(0, 0, 1, "k0", 0, "a", 1),
			kvSwap(1, 0, 1, "k1", 0, "b", 2),
			kvGet(2, 2, 3, "k0", "a", 1),
			kvNoSwap(2, 2, 3, "k1", 0, "c", "b", 2),
			kvCASUnknown(1, 4, "k1", 2, "d"),
		)},
		{name: "one version on two keys", want: []string{"both stored version 3"}, ops: ops(
			kvSwap(0, 0, 1, "k0", 0, "a", 3),
			kvSwap(1, 0, 1, "k1", 0, "b", 3),
		)},
		{name: "one version, two values in reads", want: []string{`version 4 is "k0" = "a"`, `"k0" = "b"`}, ops: ops(
			kvGet(0, 0, 1, "k0", "a", 4),
			kvGet(1, 2, 3, "k0", "b", 4),
		)},
	})
}

// TestAllCoversTheRegister shows that All runs the register's checks: a
// stale read of the register fails the whole history.
func TestAllCoversTheRegister(t *testing.T) {
	cfg := testCfg
	cfg.VisualizeDir = t.TempDir()
	errs := All(ops(
		kvSwap(0, 0, 1, "k0", 0, "a", 1),
		kvSwap(0, 2, 3, "k0", 1, "b", 2),
		kvGet(1, 4, 5, "k0", "a", 1),
	), cfg)
	if len(errs) != 1 {
		t.Fatalf("want the register's violation alone, got %v", errs)
	}
	t.Log(errs[0])
}
