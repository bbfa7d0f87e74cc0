//go:build !chaos_broken_votes

package raftnode

import (
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// stableStore returns where Raft keeps its current term and its vote: the
// BoltStore that holds the log, which commits every write to disk before
// returning, so a vote is durable before Raft grants it and a restarted
// node can never vote twice in one term. The chaos_broken_votes build tag
// replaces it with a store that forgets both, to show that the
// fault-injection checks catch two leaders in one term.
func stableStore(s *raftboltdb.BoltStore) raft.StableStore { return s }
