package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestServeBadFlags: a serve command that cannot work says why and exits
// non-zero before it binds anything.
func TestServeBadFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--node-id", "n1", "--backend", "zookeeper"}, `--backend "zookeeper": want raft or etcd`},
		{[]string{"--node-id", "n1"}, "--data-dir is required with the raft backend"},
		{[]string{"--node-id", "n1", "--backend", "etcd"}, "--backend etcd needs --etcd-endpoints"},
		{[]string{"--node-id", "n1", "--backend", "etcd", "--etcd-endpoints", "127.0.0.1:1", "--peers", "n1=127.0.0.1:7001"}, "--peers is for the raft backend"},
		{[]string{"--node-id", "n1", "--backend", "etcd", "--etcd-endpoints", "127.0.0.1:1", "--etcd-ttl", "1500ms"}, "--etcd-ttl 1.5s: want whole seconds"},
		{[]string{"--node-id", "n1", "--backend", "etcd", "--etcd-endpoints", "127.0.0.1:1", "--chunks-per-task", "0"}, "--chunks-per-task must be >= 1"},
		{[]string{"--node-id", "n1", "--backend", "etcd", "--etcd-endpoints", "127.0.0.1:1", "--log-level", "loud"}, `--log-level "loud"`},
	} {
		var out, errOut bytes.Buffer
		code := RunWith(append([]string{"raftmaster", "serve"}, tt.args...), &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("serve %q: exit %d, stderr %q; want an error containing %q", tt.args, code, errOut.String(), tt.want)
		}
	}
}
