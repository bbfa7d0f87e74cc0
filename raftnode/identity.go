package raftnode

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/raft"
)

// A node's data directory holds its incarnation: the Raft server id it
// was given when the directory was made, its name followed by
// IncarnationSep and a random suffix ("n2~3fa4c1d0"). A node whose volume
// was lost comes back with a new incarnation, so that it can never be
// taken for the server it was: Raft counts a vote, or an acknowledged
// entry, under the id it addressed, and an empty node that answered
// under its old id would cast the vote its old self may already have cast
// in that term, or acknowledge entries in place of the ones it lost. The
// incarnation is stored with Raft's own term and vote, in the log store,
// so that the two are lost together and never apart.
//
// A data directory of an earlier release holds Raft state and no
// incarnation: its server id is the node's name, as it was.

// IncarnationSep separates a node's name from its incarnation in a Raft
// server id. Node names may not contain it.
const IncarnationSep = "~"

// identityKey is the stable-store key of the node's incarnation. It shares
// the bolt file with Raft's current term and vote.
var identityKey = []byte("raftmaster.identity")

// levelKey is the stable-store key of the highest protocol level the
// node's state machine has reached: the transport uses it from start-up,
// before the log is replayed (transportLevel).
var levelKey = []byte("raftmaster.protocol")

// identity is what the data directory says about the node.
type identity struct {
	// ServerID is the node's Raft server id.
	ServerID string `json:"server_id"`
	// Name is the node's name (its --node-id).
	Name string `json:"name"`
}

// NameOf returns the node name of a Raft server id: the id up to
// IncarnationSep, or the whole id of a node of an earlier release.
func NameOf(serverID string) string {
	name, _, _ := strings.Cut(serverID, IncarnationSep)
	return name
}

// CheckNodeName refuses a node name that could not prefix a server id:
// empty, or holding IncarnationSep, '#' (which the Raft transport uses to
// name the server it dials), white space or control characters.
func CheckNodeName(name string) error {
	if name == "" {
		return errors.New("the node name is empty")
	}
	if len(name) > 128 {
		return fmt.Errorf("node name %.20q...: longer than 128 bytes", name)
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f || r == '#' || string(r) == IncarnationSep {
			return fmt.Errorf("node name %q: it may not hold white space, control characters, '#' or %q", name, IncarnationSep)
		}
	}
	return nil
}

// newIncarnation returns a fresh server id for node name.
func newIncarnation(name string) (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("raftnode: incarnation: %w", err)
	}
	return name + IncarnationSep + hex.EncodeToString(b[:]), nil
}

// kvStore is the part of the stable store the identity lives in.
type kvStore interface {
	Get(key []byte) ([]byte, error)
	Set(key, val []byte) error
	GetUint64(key []byte) (uint64, error)
}

// loadIdentity returns the node's identity from its stable store, making
// one when there is none: the node's name for a directory of an earlier
// release, whose log store holds a term or entries, and a new incarnation
// otherwise. hasLog reports whether the log store holds entries.
func loadIdentity(store kvStore, name string, hasLog bool) (identity, bool, error) {
	b, err := store.Get(identityKey)
	switch {
	case err == nil && len(b) > 0:
		var id identity
		if err := json.Unmarshal(b, &id); err != nil {
			return identity{}, false, fmt.Errorf("raftnode: the data directory's identity: %w", err)
		}
		if id.Name != name {
			return identity{}, false, fmt.Errorf("raftnode: the data directory belongs to node %q (server id %s), not %q: "+
				"start it with --node-id %s, or give this node an empty directory", id.Name, id.ServerID, name, id.Name)
		}
		return id, false, nil
	case err != nil && !isNotFound(err):
		return identity{}, false, fmt.Errorf("raftnode: read the data directory's identity: %w", err)
	}
	term, err := store.GetUint64([]byte("CurrentTerm"))
	if err != nil && !isNotFound(err) {
		return identity{}, false, fmt.Errorf("raftnode: read the current term: %w", err)
	}
	id := identity{ServerID: name, Name: name}
	if term == 0 && !hasLog {
		if id.ServerID, err = newIncarnation(name); err != nil {
			return identity{}, false, err
		}
	}
	b, _ = json.Marshal(id)
	if err := store.Set(identityKey, b); err != nil {
		return identity{}, false, fmt.Errorf("raftnode: store the node's identity: %w", err)
	}
	return id, true, nil
}

// isNotFound matches the "not found" error of raft's stable stores.
func isNotFound(err error) bool { return err != nil && err.Error() == "not found" }

// hasVote reports whether configuration c lists id as a voter.
func hasVote(c raft.Configuration, id string) bool {
	for _, s := range c.Servers {
		if string(s.ID) == id {
			return s.Suffrage == raft.Voter
		}
	}
	return false
}
