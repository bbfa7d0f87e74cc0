package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestServePprofLoopbackOnly: --pprof-addr on an address other hosts may
// reach fails the start, unless --pprof-remote is given, which warns. The
// backend flag is wrong on purpose, so that a start that gets past the
// profile address stops there.
func TestServePprofLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		var out, errOut bytes.Buffer
		code := RunWith([]string{"raftmaster", "serve", "--node-id", "n1", "--backend", "zookeeper", "--pprof-addr", addr}, &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), "is not a loopback address") {
			t.Errorf("serve --pprof-addr %s: exit %d, stderr %q; want a refusal of the address", addr, code, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	code := RunWith([]string{"raftmaster", "serve", "--node-id", "n1", "--backend", "zookeeper", "--pprof-addr", "0.0.0.0:0", "--pprof-remote"}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "serving profiles on an address other hosts may reach") ||
		!strings.Contains(errOut.String(), `--backend "zookeeper"`) {
		t.Errorf("serve --pprof-addr 0.0.0.0:0 --pprof-remote: exit %d, stderr %q; want a warning, then the backend's error", code, errOut.String())
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0"} {
		if !loopback(addr) {
			t.Errorf("loopback(%q) = false", addr)
		}
	}
}

// TestServeBoundFlags: bad bounds and etcd credentials fail the start
// with an error that names the flag.
func TestServeBoundFlags(t *testing.T) {
	t.Setenv(etcdPasswordEnv, "")
	etcd := []string{"--node-id", "n1", "--backend", "etcd", "--etcd-endpoints", "127.0.0.1:1"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-connections", "0"}, "--max-connections 0: want at least 1"},
		{[]string{"--http-read-timeout", "-1s"}, "--http-read-timeout -1s: want a positive duration"},
		{[]string{"--http-max-header-bytes", "100"}, "--http-max-header-bytes 100: want at least 4096"},
		{[]string{"--etcd-cert", "c.pem"}, "--etcd-cert and --etcd-key go together"},
		{[]string{"--etcd-cacert", "/nonexistent/ca.pem"}, "--etcd-cacert: open /nonexistent/ca.pem"},
		{[]string{"--etcd-user", "master"}, "--etcd-user master needs a password: set $RAFTMASTER_ETCD_PASSWORD or --etcd-password-file"},
		{[]string{"--etcd-password-file", "p"}, "--etcd-password-file needs --etcd-user"},
	} {
		var out, errOut bytes.Buffer
		code := RunWith(append(append([]string{"raftmaster", "serve"}, etcd...), tt.args...), &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("serve %q: exit %d, stderr %q; want an error containing %q", tt.args, code, errOut.String(), tt.want)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--snapshot-bytes", "1000"}, "--snapshot-bytes 1000: want at least 1 MiB"},
		{[]string{"--log-cache-bytes", "0"}, "--log-cache-bytes 0: want at least 1 MiB"},
	} {
		var out, errOut bytes.Buffer
		code := RunWith(append([]string{"raftmaster", "serve", "--node-id", "n1", "--data-dir", t.TempDir(), "--insecure"}, tt.args...), &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("serve %q: exit %d, stderr %q; want an error containing %q", tt.args, code, errOut.String(), tt.want)
		}
	}
}

// TestServeWarnsWithoutDatasetRoot: a node whose API other hosts may reach
// and that has no --dataset-root warns at start; on loopback, or with a
// root, it does not. The backend flag stops the start after the warning.
func TestServeWarnsWithoutDatasetRoot(t *testing.T) {
	t.Setenv(env("dataset-root")[0], "")
	for _, tt := range []struct {
		args []string
		warn bool
	}{
		{[]string{"--http-addr", "0.0.0.0:8001"}, true},
		{[]string{"--http-addr", "10.1.2.3:8001"}, true},
		{[]string{"--http-addr", "127.0.0.1:8001"}, false},
		{[]string{"--http-addr", "0.0.0.0:8001", "--dataset-root", t.TempDir()}, false},
	} {
		var out, errOut bytes.Buffer
		RunWith(append([]string{"raftmaster", "serve", "--node-id", "n1", "--backend", "zookeeper"}, tt.args...), &out, &errOut)
		if got := strings.Contains(errOut.String(), "no --dataset-root"); got != tt.warn {
			t.Errorf("serve %q: warned %v, want %v; stderr %q", tt.args, got, tt.warn, errOut.String())
		}
	}
}
