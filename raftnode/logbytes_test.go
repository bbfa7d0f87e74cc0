package raftnode

import (
	"bytes"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/fsm"
)

// TestByteLogCacheBoundsBytes: the cache keeps the latest entries up to
// its byte bound, serves them from memory, and reads older ones from the
// store.
func TestByteLogCacheBoundsBytes(t *testing.T) {
	store := raft.NewInmemStore()
	c := newByteLogCache(store, 1024, 10<<20)
	for i := uint64(1); i <= 40; i++ {
		if err := c.StoreLogs([]*raft.Log{{Index: i, Term: 1, Data: bytes.Repeat([]byte{byte(i)}, 1<<20)}}); err != nil {
			t.Fatal(err)
		}
	}
	if c.bytes > 10<<20 {
		t.Fatalf("cache holds %d bytes, more than its 10 MiB", c.bytes)
	}
	if len(c.logs) == 0 || c.logs[len(c.logs)-1].Index != 40 {
		t.Fatalf("cache lost the latest entry: %d cached", len(c.logs))
	}
	for _, i := range []uint64{1, 20, 40} {
		var l raft.Log
		if err := c.GetLog(i, &l); err != nil || l.Index != i || l.Data[0] != byte(i) {
			t.Fatalf("GetLog(%d) = %d %v", i, l.Index, err)
		}
	}
	// Small entries are bounded by count.
	small := newByteLogCache(raft.NewInmemStore(), 8, 10<<20)
	for i := uint64(1); i <= 20; i++ {
		if err := small.StoreLog(&raft.Log{Index: i, Term: 1, Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if len(small.logs) != 8 || small.logs[0].Index != 13 {
		t.Fatalf("count bound: %d cached from %d", len(small.logs), small.logs[0].Index)
	}
	// An overwrite after a truncation restarts the cache.
	if err := small.DeleteRange(15, 20); err != nil {
		t.Fatal(err)
	}
	if err := small.StoreLog(&raft.Log{Index: 15, Term: 2, Data: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := small.GetLog(15, &l); err != nil || l.Term != 2 {
		t.Fatalf("GetLog(15) after an overwrite: term %d %v", l.Term, err)
	}
}

// TestLogBytesTrailing: the trailing entry count fits the byte budget, is
// at least one, and is the count bound when every entry seen fits.
func TestLogBytesTrailing(t *testing.T) {
	b := newLogBytes(100, 64<<20)
	if got := b.trailing(64<<20, 100); got != 100 {
		t.Fatalf("no entries yet: trailing %d, want 100", got)
	}
	for range 30 {
		b.applied(1000)
	}
	if got := b.trailing(64<<20, 100); got != 100 {
		t.Fatalf("small entries: trailing %d, want 100", got)
	}
	for range 200 {
		b.applied(1 << 20)
	}
	if got := b.trailing(64<<20, 100); got != 64 {
		t.Fatalf("1 MiB entries: trailing %d, want 64", got)
	}
	b.applied(100 << 20)
	if got := b.trailing(64<<20, 100); got != 1 {
		t.Fatalf("one entry over the budget: trailing %d, want 1", got)
	}
	if b.sinceSnapshot() < 64<<20 {
		t.Fatal("bytes since the snapshot not counted")
	}
	select {
	case <-b.over:
	default:
		t.Fatal("over the threshold, and not signalled")
	}
	b.snapshotted()
	if b.sinceSnapshot() != 0 {
		t.Fatal("a snapshot did not restart the count")
	}
}

// TestSnapshotByBytes: a node snapshots once the log since its last
// snapshot passes SnapshotBytes, long before the entry threshold, and the
// compaction keeps only the entries that fit TrailingLogBytes.
func TestSnapshotByBytes(t *testing.T) {
	c := newTestClusterWith(t, 1, func(cfg *Config) {
		cfg.SnapshotThreshold = 1 << 20
		cfg.SnapshotBytes = 2 << 20
		cfg.TrailingLogBytes = 1 << 20
		cfg.LogCacheBytes = 1 << 20
	})
	node := c.leader()
	value := bytes.Repeat([]byte{7}, 200<<10)
	var version uint64
	for range 40 {
		r := c.apply(&fsm.KVCompareAndSet{Header: fsm.Header{Job: "big"}, Key: "k", Version: version, Value: value})
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
		version = r.KV.Version
	}
	// The log keeps what was applied since the last snapshot (under
	// SnapshotBytes: 10 entries at most) and the trailing entries that
	// fit TrailingLogBytes (5), and a few small entries of Raft's own.
	waitFor(t, "a snapshot for the log's bytes, and a compaction to the byte bounds", func() bool {
		first, err := node.store.FirstIndex()
		if err != nil {
			t.Fatal(err)
		}
		last, err := node.store.LastIndex()
		if err != nil {
			t.Fatal(err)
		}
		return first > 1 && last-first+1 <= 18
	})
}
