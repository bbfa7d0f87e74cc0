package raftnode

import (
	"errors"
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

// logBytes counts the bytes of the log entries the state machine applied:
// those since the last snapshot, and the sizes of the latest ones, from
// which the number of trailing entries that fit a byte budget follows.
// Apply and Snapshot run on Raft's FSM goroutine; the node's log loop
// reads it from another.
type logBytes struct {
	mu    sync.Mutex
	since int64
	// sizes is a ring of the latest entries' sizes, sizes[next] the
	// oldest once it is full.
	sizes []uint32
	next  int
	full  bool
	// threshold is the byte count that signals over.
	threshold int64
	over      chan struct{}
}

// newLogBytes tracks the sizes of up to entries of the latest entries and
// signals once threshold bytes were applied since the last snapshot.
func newLogBytes(entries int, threshold int64) *logBytes {
	return &logBytes{sizes: make([]uint32, max(entries, 1)), threshold: threshold, over: make(chan struct{}, 1)}
}

// applied counts an applied entry of size bytes.
func (b *logBytes) applied(size int) {
	b.mu.Lock()
	b.since += int64(size)
	b.sizes[b.next] = uint32(min(size, 1<<32-1))
	if b.next++; b.next == len(b.sizes) {
		b.next, b.full = 0, true
	}
	over := b.since >= b.threshold
	b.mu.Unlock()
	if over {
		select {
		case b.over <- struct{}{}:
		default:
		}
	}
}

// snapshotted starts the count since the last snapshot afresh: the state
// machine has just been copied for one.
func (b *logBytes) snapshotted() {
	b.mu.Lock()
	b.since = 0
	b.mu.Unlock()
}

// sinceSnapshot returns the bytes applied since the last snapshot.
func (b *logBytes) sinceSnapshot() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.since
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

// boundLog keeps the log's bytes bounded: it takes a snapshot once
// SnapshotBytes were applied since the last one, and keeps Raft's
// TrailingLogs at the number of the latest entries that fit in
// TrailingLogBytes, so that each compaction leaves that many bytes at
// most. Snapshots are taken here, never from inside the state machine's
// Apply, which Raft's snapshot waits for.
func (n *Node) boundLog() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.SnapshotInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-n.logBytes.over:
		case <-t.C:
		}
		n.setTrailing()
		if n.logBytes.sinceSnapshot() < n.cfg.SnapshotBytes {
			continue
		}
		err := n.raft.Snapshot().Error()
		switch {
		case err == nil:
			n.log.Debug("snapshot taken: the log since the last one passed its byte threshold", "threshold", n.cfg.SnapshotBytes)
		case errors.Is(err, raft.ErrNothingNewToSnapshot), errors.Is(err, raft.ErrRaftShutdown):
		default:
			n.log.Warn("taking a snapshot for the log's byte threshold", "error", err)
		}
	}
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
