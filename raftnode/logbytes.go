package raftnode

import (
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Defaults of the log's byte bounds (Config.SnapshotBytes,
// TrailingLogBytes and LogCacheBytes).
const (
	DefaultSnapshotBytes    = 64 << 20
	DefaultTrailingLogBytes = 64 << 20
	DefaultLogCacheBytes    = 16 << 20
)

// logBytes counts the entries and bytes of the log the state machine
// applied since the last snapshot, and the time their applies took, and
// the sizes of the latest entries, from which the number of trailing
// entries that fit a byte budget follows. It knows the size and the cost
// in time of the latest snapshot, which decide when the next is due.
// Apply, Snapshot and Restore run on Raft's FSM goroutine, Persist on its
// snapshot goroutine; the node's log loop reads it from another.
type logBytes struct {
	mu      sync.Mutex
	since   int64
	entries uint64
	// applying is the time the applies since the last snapshot took;
	// atSnapshot is what it was when the last snapshot was taken.
	applying, atSnapshot time.Duration
	// sizes is a ring of the latest entries' sizes, sizes[next] the
	// oldest once it is full.
	sizes []uint32
	next  int
	full  bool
	// threshold is the byte count that takes a snapshot whatever the
	// entry count (Config.SnapshotBytes), unless the last snapshot was
	// larger.
	threshold int64
	// size and cost are the bytes of the snapshot this node last wrote
	// or restored and the time that took (copying the state, encoding
	// and writing it, or reading and decoding it); 0 before the first.
	size int64
	cost time.Duration
	over chan struct{}
}

// newLogBytes tracks the sizes of up to entries of the latest entries and
// signals once threshold bytes were applied since the last snapshot.
func newLogBytes(entries int, threshold int64) *logBytes {
	return &logBytes{sizes: make([]uint32, max(entries, 1)), threshold: threshold, over: make(chan struct{}, 1)}
}

// applied counts an applied entry of size bytes whose apply took took.
func (b *logBytes) applied(size int, took time.Duration) {
	b.mu.Lock()
	b.since += int64(size)
	b.entries++
	b.applying += took
	b.sizes[b.next] = uint32(min(size, 1<<32-1))
	if b.next++; b.next == len(b.sizes) {
		b.next, b.full = 0, true
	}
	over := b.since >= b.byteThreshold()
	b.mu.Unlock()
	if over {
		select {
		case b.over <- struct{}{}:
		default:
		}
	}
}

// byteThreshold is the log in bytes that takes a snapshot whatever the
// entry count: threshold, or the last snapshot's size if larger, so that
// the log on disk stays within about twice the state. b.mu is held.
func (b *logBytes) byteThreshold() int64 { return max(b.threshold, b.size) }

// snapshotted starts the counts since the last snapshot afresh: the state
// machine has just been copied for one, or restored from one.
func (b *logBytes) snapshotted() {
	b.mu.Lock()
	b.atSnapshot = b.applying
	b.since, b.entries, b.applying = 0, 0, 0
	b.mu.Unlock()
}

// snapshotDone records the size and the cost of the snapshot just
// written or restored.
func (b *logBytes) snapshotDone(size int64, cost time.Duration) {
	b.mu.Lock()
	b.size, b.cost = size, cost
	b.mu.Unlock()
}

// sinceSnapshot returns the bytes applied since the last snapshot.
func (b *logBytes) sinceSnapshot() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.since
}

// due reports whether the log since the last snapshot calls for another:
// it holds the byte threshold, or at least minEntries entries whose
// applies took at least as long as the last snapshot did. Taking
// snapshots then costs a node at most about as much time as applying the
// log does, whatever the state's size, and a restart replays at most
// about a snapshot's cost of entries.
func (b *logBytes) due(minEntries uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.since >= b.byteThreshold() || (b.entries >= minEntries && b.applying >= b.cost)
}

// trailing returns how many of the latest entries fit in budget bytes, at
// least 1 and at most limit, the ring's size.
func (b *logBytes) trailing(budget int64, limit uint64) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var sum int64
	n := uint64(0)
	count := b.next
	if b.full {
		count = len(b.sizes)
	}
	for i := range count {
		j := (b.next - 1 - i + len(b.sizes)) % len(b.sizes)
		if sum += int64(b.sizes[j]); sum > budget {
			break
		}
		n++
	}
	if n == uint64(count) {
		n = limit // every entry seen fits: the bound is the count's
	}
	return min(max(n, 1), limit)
}

// boundLog keeps the log's bytes bounded and decides every snapshot but
// those asked for (Raft's own threshold is off, see New): it takes one
// at once when the log since the last one holds the byte threshold, and,
// checking at a random time between SnapshotInterval and twice that (as
// Raft does, so that the servers seldom write theirs together), once it
// holds SnapshotThreshold entries whose applies took as long as the last
// snapshot (due). A counted threshold alone would write a state of 10
// million tasks (a 130 MB snapshot, a second or more of work) every
// 8,192 small entries. It also keeps Raft's TrailingLogs at the number
// of the latest entries that fit in TrailingLogBytes, so that each
// compaction leaves that many bytes at most. Snapshots are taken here,
// never from inside the state machine's Apply, which Raft's snapshot
// waits for.
func (n *Node) boundLog() {
	defer n.wg.Done()
	t := time.NewTimer(jittered(n.cfg.SnapshotInterval))
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-n.logBytes.over:
		case <-t.C:
			t.Reset(jittered(n.cfg.SnapshotInterval))
		}
		n.setTrailing()
		if !n.logBytes.due(n.cfg.SnapshotThreshold) {
			continue
		}
		err := n.raft.Snapshot().Error()
		switch {
		case err == nil:
			n.log.Debug("snapshot taken: the log since the last one passed its threshold")
		case errors.Is(err, raft.ErrNothingNewToSnapshot), errors.Is(err, raft.ErrRaftShutdown):
		default:
			n.log.Warn("taking a snapshot for the log's threshold", "error", err)
		}
	}
}

// jittered returns a random duration between d and 2d.
func jittered(d time.Duration) time.Duration {
	return d + rand.N(d)
}

// setTrailing sets Raft's TrailingLogs to the entries that fit in
// TrailingLogBytes, when that changed.
func (n *Node) setTrailing() {
	want := n.logBytes.trailing(n.cfg.TrailingLogBytes, n.cfg.TrailingLogs)
	rc := n.raft.ReloadableConfig()
	if rc.TrailingLogs == want {
		return
	}
	rc.TrailingLogs = want
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Warn("setting the trailing log entries", "entries", want, "error", err)
	}
}

// byteLogCache keeps the latest log entries in memory, as raft.LogCache
// does, but bounded in bytes as well as in entries: a few large entries
// cannot hold the memory that a thousand small ones would.
type byteLogCache struct {
	raft.LogStore
	maxBytes   int64
	maxEntries int

	mu sync.RWMutex
	// logs are consecutive entries, oldest first.
	logs  []*raft.Log
	bytes int64
}

var _ raft.LogStore = (*byteLogCache)(nil)

// newByteLogCache caches the latest entries of store, up to maxEntries
// and maxBytes of entry data.
func newByteLogCache(store raft.LogStore, maxEntries int, maxBytes int64) *byteLogCache {
	return &byteLogCache{LogStore: store, maxEntries: maxEntries, maxBytes: maxBytes}
}

// IsMonotonic tells Raft whether the store's indexes only grow.
func (c *byteLogCache) IsMonotonic() bool {
	m, ok := c.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// GetLog reads entry idx from the cache, or from the store.
func (c *byteLogCache) GetLog(idx uint64, log *raft.Log) error {
	c.mu.RLock()
	if len(c.logs) > 0 && idx >= c.logs[0].Index && idx-c.logs[0].Index < uint64(len(c.logs)) {
		*log = *c.logs[idx-c.logs[0].Index]
		c.mu.RUnlock()
		return nil
	}
	c.mu.RUnlock()
	return c.LogStore.GetLog(idx, log)
}

// StoreLog stores one entry.
func (c *byteLogCache) StoreLog(log *raft.Log) error { return c.StoreLogs([]*raft.Log{log}) }

// StoreLogs stores entries in the store, then caches them, dropping the
// oldest cached ones beyond the bounds.
func (c *byteLogCache) StoreLogs(logs []*raft.Log) error {
	if err := c.LogStore.StoreLogs(logs); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range logs {
		if n := len(c.logs); n > 0 && c.logs[n-1].Index+1 != l.Index {
			c.logs, c.bytes = nil, 0 // a gap or an overwrite: start afresh
		}
		c.logs = append(c.logs, l)
		c.bytes += logSize(l)
	}
	drop := 0
	for drop < len(c.logs) && (len(c.logs)-drop > c.maxEntries || c.bytes > c.maxBytes) {
		c.bytes -= logSize(c.logs[drop])
		c.logs[drop] = nil
		drop++
	}
	c.logs = c.logs[drop:]
	if cap(c.logs) > 2*c.maxEntries {
		c.logs = append([]*raft.Log(nil), c.logs...)
	}
	return nil
}

// DeleteRange empties the cache and deletes the entries from the store.
func (c *byteLogCache) DeleteRange(lo, hi uint64) error {
	c.mu.Lock()
	c.logs, c.bytes = nil, 0
	c.mu.Unlock()
	return c.LogStore.DeleteRange(lo, hi)
}

// logSize is the memory an entry holds, roughly.
func logSize(l *raft.Log) int64 { return int64(len(l.Data) + len(l.Extensions) + 64) }
