package raftnode

import (
	"bytes"
	"strconv"
	"testing"
	"time"

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
		b.applied(1000, 0)
	}
	if got := b.trailing(64<<20, 100); got != 100 {
		t.Fatalf("small entries: trailing %d, want 100", got)
	}
	for range 200 {
		b.applied(1<<20, 0)
	}
	if got := b.trailing(64<<20, 100); got != 64 {
		t.Fatalf("1 MiB entries: trailing %d, want 64", got)
	}
	b.applied(100<<20, 0)
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

// TestLogBytesDue: a snapshot is due at the byte threshold whatever the
// count, and at the entry threshold only once the applies since the last
// snapshot took as long as that snapshot did.
func TestLogBytesDue(t *testing.T) {
	b := newLogBytes(100, 1<<20)
	for range 9 {
		b.applied(10, time.Millisecond)
	}
	if b.due(10) {
		t.Fatal("due before the entry threshold")
	}
	b.applied(10, time.Millisecond)
	if !b.due(10) {
		t.Fatal("not due at the entry threshold with no snapshot yet")
	}
	b.snapshotted()
	b.snapshotDone(5000, 500*time.Millisecond)
	for range 499 {
		b.applied(10, time.Millisecond)
	}
	if b.due(10) {
		t.Fatal("due after 499 ms of applies since a snapshot that took 500 ms")
	}
	b.applied(10, time.Millisecond)
	if !b.due(10) {
		t.Fatal("not due after as long applying as the last snapshot took")
	}
	// A snapshot larger than the byte threshold raises it.
	b.snapshotted()
	b.snapshotDone(3<<20, time.Hour)
	for range 2 {
		b.applied(1<<20, 0)
	}
	select {
	case <-b.over:
		t.Fatal("signalled over at 2 MiB of log after a 3 MiB snapshot")
	default:
	}
	if b.due(1) {
		t.Fatal("due under the byte threshold and the snapshot's cost")
	}
	b.applied(1<<20, 0)
	select {
	case <-b.over:
	default:
		t.Fatal("not signalled at as many bytes as the last snapshot")
	}
	if !b.due(1 << 30) {
		t.Fatal("not due at the byte threshold")
	}
}

// TestSnapshotWaitsForAppliesAsCostlyAsItself: with a state far larger
// than the entries that change it, a node takes its next snapshot only
// once the applies since the last one took as long as that snapshot did,
// not every SnapshotThreshold entries; and it does take it then.
func TestSnapshotWaitsForAppliesAsCostlyAsItself(t *testing.T) {
	c := newTestClusterWith(t, 1, func(cfg *Config) {
		cfg.SnapshotThreshold = 16
		cfg.SnapshotInterval = 10 * time.Millisecond
	})
	node := c.leader()
	lastSnapshot := func() uint64 {
		i, err := strconv.ParseUint(node.Raft().Stats()["last_snapshot_index"], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	for k := range 16 {
		r := c.apply(&fsm.KVCompareAndSet{Header: fsm.Header{Job: "big"}, Key: strconv.Itoa(k), Value: bytes.Repeat([]byte{1}, 256<<10)})
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
	}
	small := bytes.Repeat([]byte{2}, 512)
	var version uint64
	write := func() {
		r := c.apply(&fsm.KVCompareAndSet{Header: fsm.Header{Job: "small"}, Key: "k", Version: version, Value: small})
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
		version = r.KV.Version
	}
	for lastSnapshot() == 0 {
		write()
	}
	first := lastSnapshot()
	b := node.logBytes
	b.mu.Lock()
	size, cost := b.size, b.cost
	b.mu.Unlock()
	if size < 1<<20 || cost <= 0 {
		t.Fatalf("the first snapshot: %d bytes in %s, want most of the 4 MiB state", size, cost)
	}
	for lastSnapshot() == first {
		write()
	}
	b.mu.Lock()
	applying := b.atSnapshot
	b.mu.Unlock()
	if applying < cost {
		t.Fatalf("second snapshot %d entries after the first, whose applies took %s, less than the %s the first snapshot took",
			lastSnapshot()-first, applying, cost)
	}
	t.Logf("second snapshot %d entries after the first (%s of applies; the first, %d bytes, took %s)", lastSnapshot()-first, applying, size, cost)
}
