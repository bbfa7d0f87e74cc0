package integration

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/certs"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// tlsFlags are the serve flags of the certificates in dir (certs.Generate)
// with the CA file ca.
func tlsFlags(dir, ca string) []string {
	return []string{"--tls-cert", filepath.Join(dir, certs.NodeCertFile), "--tls-key", filepath.Join(dir, certs.NodeKeyFile), "--tls-ca", ca}
}

func genCerts(t *testing.T, dir string) {
	t.Helper()
	if _, err := certs.Generate(certs.GenerateOptions{Dir: dir, Hosts: []string{"127.0.0.1", "localhost"}}); err != nil {
		t.Fatal(err)
	}
}

// serverSerial returns the serial number of the certificate the API at
// addr presents.
func serverSerial(t *testing.T, addr string, conf *tls.Config) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestTLSCluster starts a cluster with TLS on (serve --tls-cert, --tls-key,
// --tls-ca): the nodes elect and register over mutual TLS and HTTPS; a
// plain-HTTP client and a client that does not trust the CA are refused
// and change nothing; a client that trusts the CA works through any node,
// and a follower's redirect points to HTTPS. A node whose certificate comes
// from another CA is admitted to the configuration through the API (no
// tokens here), yet Raft refuses its connections both ways: it never
// receives the log, and it cannot vote, so that with one honest node down
// the cluster has no quorum until that node is back. SIGHUP puts a rotated
// certificate in use without a restart.
func TestTLSCluster(t *testing.T) {
	needsProcesses(t)
	dir := t.TempDir()
	good, rogue := filepath.Join(dir, "good"), filepath.Join(dir, "rogue")
	genCerts(t, good)
	genCerts(t, rogue)
	caFile := filepath.Join(good, certs.CAFile)
	t.Setenv("RAFTMASTER_TLS_CA", caFile) // the cluster's own checks and the CLI
	// The founders find each other over HTTPS (--bootstrap-expect).
	c := proccluster.Start(t, proccluster.Options{Args: tlsFlags(good, caFile), BootstrapExpect: 3})
	c.WaitReady()
	leader := c.Leader()
	fol := c.Others(leader)[0]
	conf, err := certs.ClientTLS(caFile)
	if err != nil {
		t.Fatal(err)
	}
	hash := func() string { return stateHash(t, leader) }

	before := hash()

	// Plain HTTP to the HTTPS port is refused, a write included.
	for _, addr := range []string{leader.APIAddr, fol.APIAddr} {
		resp, err := http.Post("http://"+addr+rpc.PathTaskGet, "application/json", strings.NewReader(`{"pass":0}`))
		if err == nil {
			body := new(bytes.Buffer)
			_, _ = body.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body.String(), "HTTPS") {
				t.Fatalf("plain HTTP to %s: %d %q, want 400 about HTTPS", addr, resp.StatusCode, body)
			}
		}
	}
	// The probe command trusts the CA through RAFTMASTER_TLS_CA too.
	if out, err := cli(t, c, "health", "--addr", fol.APIAddr); err != nil || !strings.Contains(out, "ready") {
		t.Fatalf("health over HTTPS: %q, %v", out, err)
	}
	// The CLI without the CA says what to do.
	if _, err := cli(t, c, "--tls-ca", "", "cluster", "inspect", "--addr", leader.APIAddr); err == nil || !strings.Contains(err.Error(), "serves HTTPS") {
		t.Fatalf("CLI over plain HTTP: %v, want an error that the node serves HTTPS", err)
	}
	// A client that does not trust the CA refuses the server.
	if _, err := http.Get("https://" + leader.APIAddr + rpc.PathStatus); !errors.As(err, new(x509.UnknownAuthorityError)) {
		t.Fatalf("HTTPS without the CA: %v, want an unknown-authority error", err)
	}
	if got := hash(); got != before {
		t.Fatalf("refused requests changed the state: %s -> %s", before, got)
	}

	// A trainer that trusts the CA works through a follower's address.
	cl := newClient(t, client.WithAddrs(fol.APIAddr), client.WithTLS(conf))
	pattern := writeDataset(t, t.TempDir(), 20, 10, 5)
	if err := cl.SetDataset([]string{pattern}); err != nil {
		t.Fatal(err)
	}
	task, err := cl.GetTask(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.TaskFinished(task.Meta); err != nil {
		t.Fatal(err)
	}

	// A follower's redirect keeps the scheme.
	hc := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: conf},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequest(http.MethodPost, "https://"+fol.APIAddr+rpc.PathTaskGet, strings.NewReader(`{"pass":0}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(rpc.HeaderRequestID, "6f1c2f4e-8a77-4c1e-9d43-2b0a6a9e5c11/1")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := new(bytes.Buffer)
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusTemporaryRedirect || loc != "https://"+leader.APIAddr+rpc.PathTaskGet {
		t.Fatalf("follower answered %d Location %q, want 307 to https://%s%s", resp.StatusCode, loc, leader.APIAddr, rpc.PathTaskGet)
	}

	// The CLI with --tls-ca (here RAFTMASTER_TLS_CA) inspects the cluster
	// through a follower, which asks every member over HTTPS.
	out, err := cli(t, c, "cluster", "inspect", "--addr", fol.APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Procs {
		if !strings.Contains(out, p.ID) {
			t.Fatalf("cluster inspect lacks %s:\n%s", p.ID, out)
		}
	}
	if strings.Contains(strings.ToLower(out), "error") {
		t.Fatalf("cluster inspect could not ask a member:\n%s", out)
	}

	// Raft's port admits a node certificate of the CA, and refuses the
	// CA's client certificate (a trainer's) and another CA's node
	// certificate, logging each refusal.
	goodCert, goodKey := filepath.Join(good, certs.NodeCertFile), filepath.Join(good, certs.NodeKeyFile)
	raftSerial, err := raftHandshake(t, leader.RaftAddr, goodCert, goodKey, caFile)
	if err != nil {
		t.Fatalf("a node certificate on Raft's port: %v", err)
	}
	for _, pair := range [][2]string{
		{filepath.Join(good, certs.ClientCertFile), filepath.Join(good, certs.ClientKeyFile)},
		{filepath.Join(rogue, certs.NodeCertFile), filepath.Join(rogue, certs.NodeKeyFile)},
	} {
		if _, err := raftHandshake(t, leader.RaftAddr, pair[0], pair[1], caFile); err == nil {
			t.Fatalf("Raft's port accepted %s", pair[0])
		}
	}
	c.WaitFor("both refusals in the leader's log", time.Minute, func() bool {
		log, _ := readFile(leader.LogPath)
		return strings.Contains(log, "is not a node certificate") && strings.Contains(log, "refused a Raft connection")
	})

	// A node with another CA's certificate, which trusts both CAs, joins
	// through the API: the leader adds it to the configuration, but Raft
	// refuses it.
	bundle := filepath.Join(dir, "both-cas.crt")
	a, _ := os.ReadFile(caFile)
	b, _ := os.ReadFile(filepath.Join(rogue, certs.CAFile))
	if err := os.WriteFile(bundle, append(a, b...), 0o644); err != nil {
		t.Fatal(err)
	}
	r := c.AddProc("rogue", []string{leader.APIAddr}, tlsFlags(rogue, bundle)...)
	bothConf, err := certs.ClientTLS(bundle)
	if err != nil {
		t.Fatal(err)
	}
	rogueState := func() rpc.DebugStateResponse {
		var st rpc.DebugStateResponse
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: bothConf}, Timeout: 3 * time.Second}
		resp, err := hc.Get("https://" + r.APIAddr + rpc.PathDebugState)
		if err == nil {
			defer resp.Body.Close()
			_ = json.NewDecoder(resp.Body).Decode(&st)
		}
		return st
	}
	cl2 := newClient(t, client.WithAddrs(leader.APIAddr), client.WithTLS(conf))
	isMember := func() bool {
		t.Helper()
		ms, err := cl2.Members()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms.Members {
			if m.ID == "rogue" {
				return true
			}
		}
		return false
	}
	// Its join requests present its certificate, which the API refuses.
	c.WaitFor("the rogue node's refused join", time.Minute, func() bool {
		log, _ := readFile(r.LogPath)
		return strings.Contains(log, "asking to become a member of the cluster") && strings.Contains(log, "certificate")
	})
	if isMember() {
		t.Fatal("the rogue node joined")
	}
	// An operator adds it by hand; Raft still refuses it, both ways.
	if err := cl2.AddMember(rpc.AddMemberRequest{ID: "rogue", RaftAddr: r.RaftAdv, APIAddr: r.APIAddr, Protocol: fsm.Protocol}); err != nil {
		t.Fatal(err)
	}
	if !isMember() {
		t.Fatal("the rogue node is not in the configuration")
	}
	c.WaitFor("Raft's refusals of the rogue node in the logs", time.Minute, func() bool {
		leaderLog, _ := readFile(leader.LogPath)
		rogueLog, _ := readFile(r.LogPath)
		return strings.Contains(leaderLog, "rogue") && strings.Contains(leaderLog, "certificate signed by unknown authority") &&
			strings.Contains(rogueLog, "refused a Raft connection")
	})
	if st := rogueState(); st.AppliedIndex != 0 {
		t.Fatalf("the rogue node applied up to %d: it received the log", st.AppliedIndex)
	}

	// Four voters need three. With one honest node down, the rogue node's
	// vote would make a quorum; it cannot vote, so there is none.
	var down *proccluster.Proc
	for _, p := range c.Procs[:3] {
		if p != leader {
			down = p
		}
	}
	c.Kill(down)
	shortCl := newClient(t, client.WithAddrs(leader.APIAddr), client.WithTLS(conf), client.WithRetry(3*time.Second))
	if _, err := shortCl.CreateJob("while-a-node-is-down"); err == nil {
		t.Fatal("a write committed with two of four voters and the rogue one")
	}
	if st := rogueState(); st.AppliedIndex != 0 {
		t.Fatalf("the rogue node applied up to %d", st.AppliedIndex)
	}
	c.Restart(down)
	if _, err := cl2.CreateJob("after-the-node-is-back"); err != nil {
		t.Fatalf("after the honest node's return: %v", err)
	}
	if err := cl2.RemoveMember("rogue"); err != nil {
		t.Fatal(err)
	}
	c.Kill(r)

	// SIGHUP puts a rotated certificate in use: a new pair from the same
	// CA replaces the files, and the API presents it with no restart.
	oldSerial := serverSerial(t, leader.APIAddr, conf)
	rotated := filepath.Join(dir, "rotated")
	rotateCert(t, good, rotated)
	for _, f := range []string{certs.NodeCertFile, certs.NodeKeyFile} {
		data, err := os.ReadFile(filepath.Join(rotated, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(good, f)+".new", data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(good, f)+".new", filepath.Join(good, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := leader.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	c.WaitFor("the rotated certificate in use", time.Minute, func() bool {
		return serverSerial(t, leader.APIAddr, conf) != oldSerial
	})
	if s, err := raftHandshake(t, leader.RaftAddr, goodCert, goodKey, caFile); err != nil || s == raftSerial {
		t.Fatalf("Raft's port after the rotation: serial %s (before %s), %v; want the new certificate", s, raftSerial, err)
	}
	if _, err := cl2.CreateJob("after-the-rotation"); err != nil {
		t.Fatalf("after the rotation: %v", err)
	}
	c.Converged(time.Minute)
}

// rotateCert writes into dst a new node certificate and key from the CA in
// src, as raftmaster tls gen does when the directory holds the CA.
func rotateCert(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{certs.CAFile, certs.CAKeyFile} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	genCerts(t, dst)
}

// raftHandshake connects to the Raft port at addr presenting the pair in
// certFile and keyFile and trusting caFile, and returns the serial number
// of the node's certificate, or why the connection was refused. The node
// sends nothing to an accepted peer until it speaks, so a read that waits
// out its deadline means the node accepted the certificate; a refusal
// arrives as an alert.
func raftHandshake(t *testing.T, addr, certFile, keyFile, caFile string) (string, error) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := certs.ClientTLS(caFile)
	if err != nil {
		t.Fatal(err)
	}
	conf.Certificates = []tls.Certificate{pair}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, conf)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	serial := conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	// A probe (the preamble byte 0xF1) is answered with the node's Hello
	// once the connection is admitted.
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte{0xF1}); err != nil {
		return "", fmt.Errorf("refused after the handshake: %v", err)
	}
	var hello struct {
		Name string `json:"name"`
	}
	if err := json.NewDecoder(conn).Decode(&hello); err != nil || hello.Name == "" {
		return "", fmt.Errorf("refused after the handshake: %v", err)
	}
	return serial, nil
}
