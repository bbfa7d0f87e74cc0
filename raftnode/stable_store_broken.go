//go:build chaos_broken_votes

package raftnode

import (
	"encoding/binary"
	"sync"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// stableStore is deliberately wrong in this build: Raft's current term and
// its vote live in memory only and never reach the BoltStore, the classic
// mistake of an in-memory stable store next to an on-disk log (or of a
// write cache that is never flushed). A running node behaves as before; a
// restarted one comes back at term 0 having voted for nobody, while its
// log still holds entries of later terms. A node can then vote again in a
// term it already voted in, and nodes restarted together elect leaders for
// terms that already had one, possibly a different node.
func stableStore(s *raftboltdb.BoltStore) raft.StableStore {
	return &forgetfulStable{disk: s, mem: map[string][]byte{}}
}

// forgetfulStable keeps the keys Raft's election safety depends on in
// memory and passes any other key through to disk.
type forgetfulStable struct {
	disk *raftboltdb.BoltStore
	mu   sync.Mutex
	mem  map[string][]byte
}

// volatile reports whether key is one of hashicorp/raft's term and vote
// keys.
func volatile(key []byte) bool {
	switch string(key) {
	case "CurrentTerm", "LastVoteTerm", "LastVoteCand":
		return true
	}
	return false
}

func (f *forgetfulStable) Set(key, val []byte) error {
	if !volatile(key) {
		return f.disk.Set(key, val)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mem[string(key)] = append([]byte(nil), val...)
	return nil
}

func (f *forgetfulStable) Get(key []byte) ([]byte, error) {
	if !volatile(key) {
		return f.disk.Get(key)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.mem[string(key)]
	if !ok {
		// Raft tells a missing key by this error's text ("not found").
		return nil, raftboltdb.ErrKeyNotFound
	}
	return append([]byte(nil), v...), nil
}

func (f *forgetfulStable) SetUint64(key []byte, val uint64) error {
	return f.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

func (f *forgetfulStable) GetUint64(key []byte) (uint64, error) {
	v, err := f.Get(key)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(v), nil
}
