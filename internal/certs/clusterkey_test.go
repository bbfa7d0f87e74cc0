package certs

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClusterKeyFile: keygen writes a key of mode 0600 that reads back,
// refuses to overwrite it without force, and a short or garbled file is
// refused with a clear error.
func TestClusterKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.key")
	if err := WriteClusterKey(path, false); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	key, err := ReadClusterKey(path)
	if err != nil || len(key) != ClusterKeyBytes {
		t.Fatalf("read back: %d bytes, %v", len(key), err)
	}
	if err := WriteClusterKey(path, false); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("overwrite without force: %v", err)
	}
	if again, _ := ReadClusterKey(path); string(again) != string(key) {
		t.Fatal("a refused overwrite changed the key")
	}
	if err := WriteClusterKey(path, true); err != nil {
		t.Fatal(err)
	}
	if again, _ := ReadClusterKey(path); string(again) == string(key) {
		t.Fatal("--force kept the old key")
	}
	b64 := filepath.Join(dir, "b64.key")
	if err := os.WriteFile(b64, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadClusterKey(b64); err != nil || string(got) != string(key) {
		t.Fatalf("base64 key: %v", err)
	}
	for name, body := range map[string]string{"short": "00112233", "garbled": "not a key at all!"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadClusterKey(p); err == nil {
			t.Fatalf("%s key accepted", name)
		}
	}
}

func derived(t *testing.T, key []byte, name string) *Store {
	t.Helper()
	s, err := FromClusterKey(key, name, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestClusterKeyDerivesOneCA: nodes that share a cluster key trust each
// other's node certificates, whose private keys differ; a node of another
// key is refused both ways; a dial checks the node id the peer's
// certificate names.
func TestClusterKeyDerivesOneCA(t *testing.T) {
	key, other := NewClusterKey(), NewClusterKey()
	n1, n2 := derived(t, key, "n1"), derived(t, key, "n2")
	if name, ok := NodeName(n2.cur.Load().leaf); !ok || name != "n2" {
		t.Fatalf("derived certificate names %q, %v", name, ok)
	}
	if serr, cerr := handshake(n1.PeerServer(), n2.PeerClient("127.0.0.1", "n1")); serr != nil || cerr != nil {
		t.Fatalf("same key: server %v, client %v", serr, cerr)
	}
	stranger := derived(t, other, "n1")
	if serr, _ := handshake(n1.PeerServer(), stranger.PeerClient("127.0.0.1", "n1")); serr == nil {
		t.Fatal("Raft accepted a peer of another cluster key")
	}
	if _, cerr := handshake(stranger.PeerServer(), n2.PeerClient("127.0.0.1", "n1")); cerr == nil {
		t.Fatal("Raft dialled a peer of another cluster key")
	}
	if _, cerr := handshake(n1.PeerServer(), n2.PeerClient("127.0.0.1", "n3")); cerr == nil || !strings.Contains(cerr.Error(), `node "n1", not of "n3"`) {
		t.Fatalf("dialling n3 and meeting n1: %v", cerr)
	}
	// Without a node id, the host is checked.
	if _, cerr := handshake(n1.PeerServer(), n2.PeerClient("127.0.0.1", "")); cerr != nil {
		t.Fatalf("dial by address: %v", cerr)
	}
	if _, cerr := handshake(n1.PeerServer(), n2.PeerClient("10.9.8.7", "")); cerr == nil {
		t.Fatal("dial of 10.9.8.7 accepted a certificate for 127.0.0.1 only")
	}
}

// TestNodeCertificateBoundToNodeID: a node certificate of tls gen
// --node-ids names its node; a dial of another node id refuses it, even
// though the CA signed it and its host matches.
func TestNodeCertificateBoundToNodeID(t *testing.T) {
	dir := t.TempDir()
	if _, err := Generate(GenerateOptions{Dir: dir, Hosts: []string{"127.0.0.1"}, NodeIDs: []string{"n1", "n2"}}); err != nil {
		t.Fatal(err)
	}
	node := func(id string) *Store {
		s, err := Load(filepath.Join(dir, NodeIDCertFile(id)), filepath.Join(dir, NodeIDKeyFile(id)), filepath.Join(dir, CAFile))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	n1, n2 := node("n1"), node("n2")
	if _, cerr := handshake(n2.PeerServer(), n1.PeerClient("127.0.0.1", "n2")); cerr != nil {
		t.Fatalf("n1 dialling n2: %v", cerr)
	}
	if _, cerr := handshake(n2.PeerServer(), n1.PeerClient("127.0.0.1", "n3")); cerr == nil || !strings.Contains(cerr.Error(), `certificate of node "n2"`) {
		t.Fatalf("n1 dialling n3 and meeting n2's certificate: %v", cerr)
	}
	// The shared certificate names no node: it is checked by address.
	shared := load(t, dir)
	if _, cerr := handshake(shared.PeerServer(), n1.PeerClient("127.0.0.1", "n3")); cerr != nil {
		t.Fatalf("a certificate without a node id, by address: %v", cerr)
	}
	if _, err := Generate(GenerateOptions{Dir: t.TempDir(), Hosts: []string{"127.0.0.1"}, NodeIDs: []string{"a~b"}}); err == nil {
		t.Fatal("a node id with ~ accepted")
	}
}
