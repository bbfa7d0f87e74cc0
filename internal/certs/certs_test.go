package certs

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func gen(t *testing.T, dir string, hosts ...string) {
	t.Helper()
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	if _, err := Generate(GenerateOptions{Dir: dir, Hosts: hosts}); err != nil {
		t.Fatal(err)
	}
}

func load(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Load(filepath.Join(dir, NodeCertFile), filepath.Join(dir, NodeKeyFile), filepath.Join(dir, CAFile))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// handshake runs a TLS handshake between server and client over loopback
// TCP and returns each side's error. The client reads once after its
// handshake, since under TLS 1.3 a server's refusal of the client's
// certificate arrives only then.
func handshake(server, client *tls.Config) (serverErr, clientErr error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err, err
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		s := tls.Server(conn, server)
		_ = s.SetDeadline(time.Now().Add(10 * time.Second))
		err = s.Handshake()
		if err == nil {
			_, err = s.Write([]byte{1})
		}
		done <- err
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return err, err
	}
	defer conn.Close()
	c := tls.Client(conn, client)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	clientErr = c.Handshake()
	if clientErr == nil {
		_, clientErr = c.Read(make([]byte, 1))
	}
	return <-done, clientErr
}

// TestGenerateWritesUsableFiles: the files load, keys are private to the
// owner, and the node certificate names every host.
func TestGenerateWritesUsableFiles(t *testing.T) {
	dir := t.TempDir()
	gen(t, dir, "127.0.0.1", "n1.example.com", "*.raftmaster.ns.svc.cluster.local")
	for _, f := range []string{CAKeyFile, NodeKeyFile, ClientKeyFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", f, fi.Mode(), err)
		}
	}
	s := load(t, dir)
	leaf := s.cur.Load().leaf
	for _, h := range []string{"127.0.0.1", "n1.example.com", "pod-0.raftmaster.ns.svc.cluster.local"} {
		if err := leaf.VerifyHostname(h); err != nil {
			t.Errorf("node certificate not valid for %s: %v", h, err)
		}
	}
	if err := leaf.VerifyHostname("other.example.com"); err == nil {
		t.Error("node certificate valid for a host it was not made for")
	}
}

// TestGenerateRefusesToOverwriteAndKeepsTheCA: a second run without Force
// writes nothing; with Force it issues new certificates from the same CA.
func TestGenerateRefusesToOverwriteAndKeepsTheCA(t *testing.T) {
	dir := t.TempDir()
	gen(t, dir)
	ca, _ := os.ReadFile(filepath.Join(dir, CAFile))
	node, _ := os.ReadFile(filepath.Join(dir, NodeCertFile))
	if _, err := Generate(GenerateOptions{Dir: dir, Hosts: []string{"localhost"}}); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second run: %v, want a refusal naming --force", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, NodeCertFile)); string(got) != string(node) {
		t.Fatal("a refused run changed the node certificate")
	}
	if _, err := Generate(GenerateOptions{Dir: dir, Hosts: []string{"localhost"}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, CAFile)); string(got) != string(ca) {
		t.Fatal("the CA changed")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, NodeCertFile)); string(got) == string(node) {
		t.Fatal("the node certificate was not renewed")
	}
	load(t, dir) // chains to the kept CA
}

// TestGenerateRejectsBadHosts: no host, or one that is neither a name nor
// an address, is refused before anything is written.
func TestGenerateRejectsBadHosts(t *testing.T) {
	for _, hosts := range [][]string{nil, {"a b"}, {"http://x"}, {""}} {
		dir := filepath.Join(t.TempDir(), "out")
		if _, err := Generate(GenerateOptions{Dir: dir, Hosts: hosts}); err == nil {
			t.Errorf("hosts %q accepted", hosts)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("hosts %q: the directory was created", hosts)
		}
	}
}

// TestLoadRefusesACertificateOfAnotherCA: a mix-up of files fails at
// start-up with a message that says so.
func TestLoadRefusesACertificateOfAnotherCA(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	gen(t, a)
	gen(t, b)
	_, err := Load(filepath.Join(a, NodeCertFile), filepath.Join(a, NodeKeyFile), filepath.Join(b, CAFile))
	if err == nil || !strings.Contains(err.Error(), "not signed by the CA") {
		t.Fatalf("Load: %v", err)
	}
	if _, err := Load(filepath.Join(a, NodeCertFile), filepath.Join(b, NodeKeyFile), filepath.Join(a, CAFile)); err == nil {
		t.Fatal("a certificate with another's key loaded")
	}
	// The client certificate cannot serve a node: Raft would refuse it.
	_, err = Load(filepath.Join(a, ClientCertFile), filepath.Join(a, ClientKeyFile), filepath.Join(a, CAFile))
	if err == nil || !strings.Contains(err.Error(), "not a node certificate") {
		t.Fatalf("Load of the client certificate as a node's: %v", err)
	}
}

// TestReloadKeepsMaterialOnError: a broken file on reload leaves the
// loaded certificate in use; a good one replaces it.
func TestReloadKeepsMaterialOnError(t *testing.T) {
	dir := t.TempDir()
	gen(t, dir)
	s := load(t, dir)
	serial := s.cur.Load().leaf.SerialNumber
	if err := os.WriteFile(filepath.Join(dir, NodeCertFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err == nil {
		t.Fatal("reload of a garbage certificate succeeded")
	}
	if s.cur.Load().leaf.SerialNumber.Cmp(serial) != 0 {
		t.Fatal("a failed reload replaced the certificate")
	}
	if _, err := Generate(GenerateOptions{Dir: dir, Hosts: []string{"localhost"}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if s.cur.Load().leaf.SerialNumber.Cmp(serial) == 0 {
		t.Fatal("reload kept the old certificate")
	}
}

// TestPeerTLSAdmitsOnlyNodeCertificatesOfTheCA: Raft's handshake succeeds
// between two node certificates of the CA, and fails for the CA's client
// certificate (a trainer's) and for a node certificate of another CA.
func TestPeerTLSAdmitsOnlyNodeCertificatesOfTheCA(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	gen(t, dir)
	gen(t, other)
	s := load(t, dir)
	if serr, cerr := handshake(s.PeerServer(), s.PeerClient("127.0.0.1", "")); serr != nil || cerr != nil {
		t.Fatalf("node to node: server %v, client %v", serr, cerr)
	}

	clientPair, err := tls.LoadX509KeyPair(filepath.Join(dir, ClientCertFile), filepath.Join(dir, ClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	asClient := s.PeerClient("127.0.0.1", "")
	asClient.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &clientPair, nil }
	if serr, _ := handshake(s.PeerServer(), asClient); serr == nil || !strings.Contains(serr.Error(), "not a node certificate") {
		t.Fatalf("a client certificate as a Raft peer: %v", serr)
	}

	stranger := load(t, other)
	if serr, _ := handshake(s.PeerServer(), stranger.PeerClient("127.0.0.1", "")); serr == nil {
		t.Fatal("Raft accepted a peer of another CA")
	}
	if _, cerr := handshake(stranger.PeerServer(), s.PeerClient("127.0.0.1", "")); cerr == nil {
		t.Fatal("Raft dialled a peer of another CA")
	}
	if _, cerr := handshake(s.APIServer(), &tls.Config{RootCAs: stranger.cur.Load().pool, ServerName: "127.0.0.1"}); cerr == nil {
		t.Fatal("a client trusting another CA accepted the API's certificate")
	}
	// The API needs no client certificate, but refuses one of another CA.
	if serr, cerr := handshake(s.APIServer(), &tls.Config{RootCAs: s.cur.Load().pool, ServerName: "127.0.0.1"}); serr != nil || cerr != nil {
		t.Fatalf("API without a client certificate: server %v, client %v", serr, cerr)
	}
	strangerClient := stranger.Client("127.0.0.1")
	strangerClient.RootCAs = s.cur.Load().pool
	if serr, _ := handshake(s.APIServer(), strangerClient); serr == nil {
		t.Fatal("the API accepted a client certificate of another CA")
	}
}
