package cli

import (
	"bytes"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/internal/replica"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/urfave/cli/v2"
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
		{[]string{"--node-id", "n1", "--data-dir", "d", "--session-ttl", "500ms"}, "--session-ttl 500ms: want 1s to 1h0m0s"},
		{[]string{"--node-id", "n1", "--data-dir", "d", "--bootstrap-expect", "3", "--members", "a:8000,b:8000"}, "--bootstrap-expect 3 needs the founding members' API addresses first in --members; it has 2"},
		{[]string{"--node-id", "n1", "--data-dir", "d", "--bootstrap-expect", "3", "--join", "a:8000,b:8000"}, "--bootstrap-expect 3 needs the founding members' API addresses first in --members; it has 2"},
		{[]string{"--node-id", "n1", "--data-dir", "d", "--bootstrap-expect", "-1", "--join", "a:8000"}, "--bootstrap-expect -1: want 0 (off)"},
		{[]string{"--node-id", "n1", "--data-dir", "d", "--bootstrap-expect", "1", "--peers", "n1=127.0.0.1:7001"}, "needs the founding members' API addresses first in --members; it has 0"},
		{[]string{"--node-id", "n1", "--data-dir", "d", "--peers", "n1=127.0.0.1:7001", "--join", "a:8000"}, "give --peers or --members (--join), not both"},
		{[]string{"--node-id", "n1", "--backend", "etcd", "--etcd-endpoints", "127.0.0.1:1", "--join", "a:8000"}, "--members is for the raft backend"},
		{[]string{"--node-id", "n1", "--backend", "etcd", "--etcd-endpoints", "127.0.0.1:1", "--bootstrap-expect", "3"}, "--bootstrap-expect is for the raft backend"},
		{[]string{"--node-id", "n1", "--data-dir", "d", "--raft-addr", "127.0.0.1:0", "--raft-advertise", "0.0.0.0:7000"}, "unspecified; other nodes could not dial it"},
		{[]string{"--node-id", "n1", "--data-dir", "d", "--tls-cert", "node.crt"}, "TLS needs --tls-cert, --tls-key and --tls-ca together"},
		{[]string{"--node-id", "n1", "--data-dir", "d", "--tls-cert", "no.crt", "--tls-key", "no.key", "--tls-ca", "no-ca.crt"}, "tls: certificate no.crt and key no.key"},
		{[]string{"--node-id", "n1", "--data-dir", "d", "--raft-addr", "127.0.0.1:0"}, "--cluster-key-file (make one with `raftmaster keygen --out cluster.key`"},
		{[]string{"--node-id", "n1", "--data-dir", "d", "--raft-addr", "127.0.0.1:0"}, "or pass --insecure"},
		{[]string{"--node-id", "n1", "--data-dir", "d", "--cluster-key-file", "no-such.key"}, "--cluster-key-file: cluster key: open no-such.key"},
	} {
		var out, errOut bytes.Buffer
		code := RunWith(append([]string{"raftmaster", "serve"}, tt.args...), &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("serve %q: exit %d, stderr %q; want an error containing %q", tt.args, code, errOut.String(), tt.want)
		}
	}
}

// TestServeRefusesAnotherNodesCertificate: a node certificate that names
// another node id stops serve before it binds anything.
func TestServeRefusesAnotherNodesCertificate(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if code := RunWith([]string{"raftmaster", "tls", "gen", "--out", dir, "--hosts", "127.0.0.1", "--node-ids", "n1,n2"}, &out, &errOut); code != 0 {
		t.Fatalf("tls gen: %s", errOut.String())
	}
	code := RunWith([]string{"raftmaster", "serve", "--node-id", "n2", "--data-dir", t.TempDir(), "--raft-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--tls-cert", dir + "/node-n1.crt", "--tls-key", dir + "/node-n1.key", "--tls-ca", dir + "/ca.crt"}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), `the certificate of node "n1", not of --node-id "n2"`) {
		t.Fatalf("serve n2 with n1's certificate: exit %d, %q", code, errOut.String())
	}
}

// TestKeygen: keygen writes a key serve reads, and refuses to overwrite
// it without --force.
func TestKeygen(t *testing.T) {
	path := t.TempDir() + "/cluster.key"
	var out, errOut bytes.Buffer
	if code := RunWith([]string{"raftmaster", "keygen", "--out", path}, &out, &errOut); code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, errOut.String())
	}
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if code := RunWith([]string{"raftmaster", "keygen", "--out", path}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "--force") {
		t.Fatalf("keygen over a key: exit %d, %q", code, errOut.String())
	}
	if again, _ := os.ReadFile(path); string(again) != string(first) {
		t.Fatal("a refused keygen changed the key")
	}
	if code := RunWith([]string{"raftmaster", "keygen", "--out", path, "--keep"}, &out, &errOut); code != 0 {
		t.Fatalf("keygen --keep over a key: exit %d", code)
	}
	if again, _ := os.ReadFile(path); string(again) != string(first) {
		t.Fatal("keygen --keep changed the key")
	}
	if code := RunWith([]string{"raftmaster", "keygen", "--out", path, "--force"}, &out, &errOut); code != 0 {
		t.Fatalf("keygen --force: exit %d", code)
	}
}

// TestServeDatasetDefaults: serve without dataset flags gives 10 chunks a
// task and 3 failures, as the original master did, and a one-minute lease
// (the client renews it while it reads), the same as
// httpapi.DefaultDatasetParams. Both backends read them through
// datasetDefaults; nothing is started.
func TestServeDatasetDefaults(t *testing.T) {
	for _, flag := range []string{"chunks-per-task", "task-timeout", "failure-max", "session-ttl"} {
		// The environment must not supply the flags; t.Setenv restores it.
		name := env(flag)[0]
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	cmd := serveCommand()
	var got replica.Config
	cmd.Action = func(c *cli.Context) error {
		var err error
		got, err = replicaConfig(c)
		return err
	}
	app := &cli.App{Name: "raftmaster", Commands: []*cli.Command{cmd}, Writer: io.Discard, ErrWriter: io.Discard}
	if err := app.Run([]string{"raftmaster", "serve", "--node-id", "n1", "--data-dir", t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	want := fsm.DatasetParams{ChunksPerTask: 10, TaskTimeout: time.Minute, FailureMax: 3}
	if p := got.API.DatasetDefaults; !reflect.DeepEqual(p, want) || !reflect.DeepEqual(p, httpapi.DefaultDatasetParams) {
		t.Fatalf("serve's dataset defaults %+v, want %+v (httpapi.DefaultDatasetParams %+v)", p, want, httpapi.DefaultDatasetParams)
	}
	if got.API.SessionTTL != rpc.DefaultSessionTTL {
		t.Fatalf("serve's session TTL %v, want rpc.DefaultSessionTTL %v", got.API.SessionTTL, rpc.DefaultSessionTTL)
	}
}

// TestServeIgnoresTheClientsCAVariable: RAFTMASTER_TLS_CA, which a shell
// that talks to a TLS cluster exports for the CLI, does not turn TLS on
// for serve by itself: serve goes on to its next check.
func TestServeIgnoresTheClientsCAVariable(t *testing.T) {
	t.Setenv("RAFTMASTER_TLS_CA", "/no/such/ca.crt")
	var out, errOut bytes.Buffer
	code := RunWith([]string{"raftmaster", "serve", "--node-id", "n1"}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "--data-dir is required") {
		t.Fatalf("serve with only RAFTMASTER_TLS_CA: exit %d, stderr %q; want the --data-dir error", code, errOut.String())
	}
}

// TestServeMembersFlag: the members to ask for membership come from
// --members or its earlier name --join, or from RAFTMASTER_MEMBERS or
// RAFTMASTER_JOIN, which the deployments of earlier releases set.
func TestServeMembersFlag(t *testing.T) {
	for _, name := range []string{"RAFTMASTER_MEMBERS", "RAFTMASTER_JOIN"} {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	members := func(args ...string) []string {
		t.Helper()
		cmd := serveCommand()
		var got replica.Raft
		cmd.Action = func(c *cli.Context) error {
			var err error
			got, err = raftConfig(c, hclog.NewNullLogger())
			return err
		}
		app := &cli.App{Name: "raftmaster", Commands: []*cli.Command{cmd}, Writer: io.Discard, ErrWriter: io.Discard}
		if err := app.Run(append([]string{"raftmaster", "serve", "--node-id", "n4", "--data-dir", t.TempDir(), "--insecure"}, args...)); err != nil {
			t.Fatalf("serve %q: %v", args, err)
		}
		return got.Members
	}
	want := []string{"a:8000", "b:8000"}
	for _, args := range [][]string{{"--members", "a:8000,b:8000"}, {"--join", "a:8000,b:8000"}, {"--join=a:8000, b:8000"}} {
		if got := members(args...); !slices.Equal(got, want) {
			t.Errorf("serve %q: members %q, want %q", args, got, want)
		}
	}
	for _, name := range []string{"RAFTMASTER_MEMBERS", "RAFTMASTER_JOIN"} {
		t.Setenv(name, "a:8000,b:8000")
		if got := members(); !slices.Equal(got, want) {
			t.Errorf("with %s: members %q, want %q", name, got, want)
		}
		os.Unsetenv(name)
	}
	if got := members(); len(got) != 0 {
		t.Errorf("without the flag: members %q", got)
	}
}
