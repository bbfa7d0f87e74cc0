// Package store holds the original's Store interface, where a single active
// master keeps its whole state, with two implementations: InMemStore, for
// tests and single-process use, and EtcdStore, the etcd-backed parity
// backend. An EtcdStore also elects the active master: it holds the etcd
// lock and publishes the master's address, as the original master did.
package store

import (
	"errors"
	"sync"
)

// Store keeps one opaque blob: the master's serialized state.
type Store interface {
	// Save replaces the stored state with state.
	Save(state []byte) error
	// Load returns the stored state, or nil when nothing has been saved.
	Load() ([]byte, error)
	// Shutdown releases the store's resources.
	Shutdown() error
}

// ErrShutdown is returned by a store after Shutdown.
var ErrShutdown = errors.New("store: shut down")

// InMemStore is a Store in memory. It is safe for concurrent use.
type InMemStore struct {
	mu    sync.Mutex
	state []byte
	down  bool
}

// NewInMemStore returns an empty InMemStore.
func NewInMemStore() *InMemStore { return &InMemStore{} }

// Save implements Store; it keeps a copy of state.
func (s *InMemStore) Save(state []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return ErrShutdown
	}
	s.state = append([]byte(nil), state...)
	return nil
}

// Load implements Store; it returns a copy of the saved state.
func (s *InMemStore) Load() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, ErrShutdown
	}
	if s.state == nil {
		return nil, nil
	}
	return append([]byte(nil), s.state...), nil
}

// Shutdown implements Store.
func (s *InMemStore) Shutdown() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = true
	return nil
}

var _ Store = (*InMemStore)(nil)
