package raftnode

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/certs"
)

// BenchmarkReplicatedApply measures entries committed by a 3-node cluster
// on loopback TCP, applied by concurrent proposers, with Raft in plain
// TCP (--insecure) and over mutual TLS with a cluster key's certificates.
func BenchmarkReplicatedApply(b *testing.B) {
	for _, secure := range []bool{false, true} {
		name := "plain"
		if secure {
			name = "tls"
		}
		b.Run(name, func(b *testing.B) {
			key := certs.NewClusterKey()
			var nodes []*Node
			var peers []Peer
			for i := range 3 {
				cfg := Config{
					ID: fmt.Sprintf("n%d", i+1), DataDir: b.TempDir(), RaftAddr: "127.0.0.1:0", APIAddr: "api",
					HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: time.Second, LeaderLeaseTimeout: 500 * time.Millisecond,
					PeerLevel: func(context.Context, fsm.Registration) (uint64, error) { return fsm.Protocol, nil },
				}
				if secure {
					s, err := certs.FromClusterKey(key, cfg.ID, []string{"127.0.0.1"})
					if err != nil {
						b.Fatal(err)
					}
					cfg.PeerTLS = s
				}
				n, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer shutdown(n)
				nodes = append(nodes, n)
				peers = append(peers, Peer{ID: n.ID(), RaftAddr: n.RaftAddr()})
			}
			for _, n := range nodes {
				if err := n.Bootstrap(peers); err != nil {
					b.Fatal(err)
				}
			}
			var leader *Node
			deadline := time.Now().Add(30 * time.Second)
			for leader == nil {
				for _, n := range nodes {
					if n.LeaderReady() {
						leader = n
					}
				}
				if time.Now().After(deadline) {
					b.Fatal("no leader")
				}
				time.Sleep(10 * time.Millisecond)
			}
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := leader.Apply(context.Background(), &fsm.CreateJob{Header: fsm.Header{Job: "bench"}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
