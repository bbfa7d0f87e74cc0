package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClientLinksNoServerCode: a trainer binary that imports this package
// must not link the server. Its dependencies may include, of this module,
// only the wire contract (rpc), recordio and the etcd backend's key layout
// (store/etcdkeys, for WithEtcd); and nothing of Raft, its stores, etcd or
// gRPC.
func TestClientLinksNoServerCode(t *testing.T) {
	const module = "github.com/raftmaster/raftmaster/"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+"client").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{module + "client": true, module + "rpc": true, module + "recordio": true, module + "store/etcdkeys": true}
	forbidden := []string{"github.com/hashicorp/raft", "github.com/hashicorp/raft-boltdb", "go.etcd.io/bbolt",
		"github.com/boltdb/bolt", "go.etcd.io/etcd", "google.golang.org/grpc", "github.com/hashicorp/go-msgpack",
		"github.com/armon/go-metrics", "github.com/hashicorp/go-metrics"}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		if strings.HasPrefix(d, module) && !allowed[d] {
			t.Errorf("client depends on %s: only the wire contract, recordio and the etcd key layout may be linked", d)
		}
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("client depends on %s", d)
			}
		}
	}
	t.Logf("client links %d non-standard packages: %s", len(deps), strings.Join(deps, " "))
}
