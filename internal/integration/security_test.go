package integration

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/certs"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/internal/procs"
	"github.com/raftmaster/raftmaster/raftnode"
)

// forgerStream is a raft.StreamLayer that dials a Raft port over plain TCP
// and names the server it means to reach, as a node's transport does: the
// stream of an attacker who can reach the port and holds no credential.
type forgerStream struct {
	target string
	dial   func(addr string, timeout time.Duration) (net.Conn, error)
	done   chan struct{}
	once   sync.Once
}

func (s *forgerStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := s.dial(string(addr), timeout)
	if err != nil {
		return nil, err
	}
	pre := append([]byte{0xF0}, binary.AppendUvarint(nil, uint64(len(s.target)))...)
	if _, err := conn.Write(append(pre, s.target...)); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func (s *forgerStream) Accept() (net.Conn, error) { <-s.done; return nil, net.ErrClosed }
func (s *forgerStream) Close() error              { s.once.Do(func() { close(s.done) }); return nil }
func (s *forgerStream) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// forgeCreateJob sends the follower fol one AppendEntries, posing as the
// current leader of its current term, that appends a CreateJob of job
// right after the follower's last entry and commits it. It reports whether
// the follower accepted the entry; an error means it was not answered.
func forgeCreateJob(t *testing.T, fol *proccluster.Proc, job string, dial func(string, time.Duration) (net.Conn, error)) (bool, error) {
	t.Helper()
	st := statusOf(t, fol)
	leaderRaft := ""
	for _, s := range st.Configuration {
		if s.ID == st.Leader.ID {
			leaderRaft = s.RaftAddr
		}
	}
	stream := &forgerStream{target: st.NodeID, dial: dial, done: make(chan struct{})}
	trans := raft.NewNetworkTransport(stream, 1, 5*time.Second, io.Discard)
	defer trans.Close()
	entry := &raft.Log{Index: st.LastIndex + 1, Term: st.Term, Type: raft.LogCommand,
		Data: fsm.Encode(&fsm.CreateJob{Header: fsm.Header{Job: job}})}
	req := &raft.AppendEntriesRequest{
		RPCHeader:         raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(st.Leader.ID), Addr: []byte(leaderRaft)},
		Term:              st.Term,
		PrevLogEntry:      st.LastIndex,
		PrevLogTerm:       st.Term,
		Entries:           []*raft.Log{entry},
		LeaderCommitIndex: st.LastIndex + 1,
	}
	var resp raft.AppendEntriesResponse
	err := trans.AppendEntries(raft.ServerID(st.NodeID), raft.ServerAddress(fol.RaftAddr), req, &resp)
	return err == nil && resp.Success, err
}

// plainDial dials over TCP, with no credential.
func plainDial(addr string, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, timeout)
}

// TestSecurityRaftForgedAppendEntriesRefused: on a cluster started with
// the defaults, a host that reaches a follower's Raft port but holds no
// credential sends it an AppendEntries posing as the leader, which would
// create a job. The follower refuses the connection: the entry is never
// appended, no node holds the job, and the replicas stay identical.
func TestSecurityRaftForgedAppendEntriesRefused(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	leader := c.Leader()
	fol := c.Others(leader)[0]
	before := statusOf(t, fol).FSM.Jobs
	// The follower's log may move on between its status and the forged
	// RPC (a registration, a tick): a few attempts make a mismatch of the
	// previous entry unlikely to hide an accepted forgery.
	for attempt := range 5 {
		accepted, err := forgeCreateJob(t, fol, "forged", plainDial)
		if accepted {
			t.Fatalf("attempt %d: the follower accepted a forged AppendEntries from a host with no credential", attempt)
		}
		if err == nil {
			t.Fatalf("attempt %d: the follower answered a forged AppendEntries (refused it as Raft, but spoke Raft to a host with no credential)", attempt)
		}
	}
	// A real write goes through, and every replica ends with the same
	// state, without the forged job.
	admin := newClient(t, client.WithAddrs(c.APIAddrs()...))
	if _, err := admin.CreateJob("real"); err != nil {
		t.Fatal(err)
	}
	c.Converged(time.Minute)
	for _, p := range c.Procs {
		if jobs := statusOf(t, p).FSM.Jobs; jobs != before+1 {
			t.Fatalf("%s holds %d jobs, want %d (the real one only)", p.ID, jobs, before+1)
		}
	}
}

// TestSecurityRaftServeRefusesWithoutCredentials: serve with neither
// certificates nor a cluster key nor --insecure exits with an error that
// names the ways out, on a loopback address too.
func TestSecurityRaftServeRefusesWithoutCredentials(t *testing.T) {
	needsProcesses(t)
	bin := proccluster.Binary(t)
	dir := t.TempDir()
	raftAddr, apiAddr := proccluster.FreePort(t), proccluster.FreePort(t)
	cmd := exec.Command(bin, "serve", "--node-id", "n1", "--data-dir", filepath.Join(dir, "n1"),
		"--raft-addr", raftAddr, "--http-addr", apiAddr, "--peers", "n1="+raftAddr)
	cmd.Env = cleanEnv()
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("serve without a cluster key, certificates or --insecure is still running after 30s; it must refuse to start:\n%s", out)
	}
	if err == nil {
		t.Fatalf("serve without credentials exited 0:\n%s", out)
	}
	for _, want := range []string{"--cluster-key-file", "raftmaster keygen", "--insecure"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("serve's refusal does not name %s:\n%s", want, out)
		}
	}
}

// cleanEnv is the environment without the RAFTMASTER_ variables a shell
// may have exported.
func cleanEnv() []string {
	return []string{"PATH=/usr/bin:/bin", "HOME=/tmp"}
}

// openIdle opens n TCP connections to addr that send nothing; they are
// closed at the end of the test.
func openIdle(t *testing.T, addr string, n int) {
	t.Helper()
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("idle connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
}

// TestSecurityRaftIdleConnectionsDoNotBlockHandshakes: 300 TCP connections
// to a node's Raft port that never start a TLS handshake do not keep its
// peers out. With them open, the leader is killed, and the node is elected
// or votes for the new leader, which commits a write that the node
// applies, well before the idle connections would time out on their own.
func TestSecurityRaftIdleConnectionsDoNotBlockHandshakes(t *testing.T) {
	needsProcesses(t)
	dir := t.TempDir()
	genCerts(t, dir)
	caFile := filepath.Join(dir, certs.CAFile)
	t.Setenv("RAFTMASTER_TLS_CA", caFile)
	c := proccluster.Start(t, proccluster.Options{Args: tlsFlags(dir, caFile)})
	c.WaitReady()
	leader := c.Leader()
	others := c.Others(leader)
	target := others[0]
	// Idle connections keep arriving while the cluster fails over.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before the wait
	openIdle(t, target.RaftAddr, 300)
	wg.Add(1)
	go func() {
		defer wg.Done()
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for ctx.Err() == nil && len(conns) < 1000 {
			c, err := net.DialTimeout("tcp", target.RaftAddr, time.Second)
			if err == nil {
				conns = append(conns, c)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	// A peer's handshake and probe get through while the idle
	// connections are open and more keep coming.
	peer, err := certs.Load(filepath.Join(dir, certs.NodeCertFile), filepath.Join(dir, certs.NodeKeyFile), caFile)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.WaitFor("a peer's TLS handshake and probe of the node with idle connections", 20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h, err := raftnode.ProbeRaft(ctx, target.RaftAddr, peer)
		return err == nil && h.Name == target.ID
	})
	t.Logf("a peer's probe got through %v after the idle connections were opened", time.Since(start).Round(time.Millisecond))
	c.Kill(leader)
	var newLeader string
	c.WaitFor("a new leader that the node with idle connections follows", 40*time.Second, func() bool {
		st, err := proccluster.Status(context.Background(), target.APIAddr)
		if err != nil || st.Leader.ID == "" || st.Term <= 0 {
			return false
		}
		for _, p := range others {
			if q, err := proccluster.Status(context.Background(), p.APIAddr); err == nil && q.State == "Leader" && q.Ready && q.NodeID == st.Leader.ID {
				newLeader = q.NodeID
				return true
			}
		}
		return false
	})
	conf, err := certs.ClientTLS(caFile)
	if err != nil {
		t.Fatal(err)
	}
	admin := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithTLS(conf))
	if _, err := admin.CreateJob("after-idle"); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, p := range others {
		if st, err := proccluster.Status(context.Background(), p.APIAddr); err == nil && st.NodeID == newLeader {
			want = st.FSM.Jobs
		}
	}
	c.WaitFor("the node with idle connections to apply the write", 40*time.Second, func() bool {
		st, err := proccluster.Status(context.Background(), target.APIAddr)
		return err == nil && st.FSM.Jobs >= want && want > 0
	})
	t.Logf("new leader %s; the node with idle connections caught up %v after the kill", newLeader, time.Since(start).Round(time.Millisecond))
}

// TestSecurityRaftOtherClusterKeyRefused: a node started with another
// cluster key, added to the configuration through the API (no tokens
// here), never gets a Raft connection through either way: it receives no
// entry, while the cluster's nodes go on committing.
func TestSecurityRaftOtherClusterKeyRefused(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	leader := c.Leader()
	other := filepath.Join(t.TempDir(), "other.key")
	if err := certs.WriteClusterKey(other, false); err != nil {
		t.Fatal(err)
	}
	honest := c.APIAddrs()
	n4 := c.AddProc("n4", []string{leader.APIAddr}, "--cluster-key-file", other)
	c.WaitFor("the leader to list n4 in its configuration", time.Minute, func() bool {
		st, err := proccluster.Status(context.Background(), c.Leader().APIAddr)
		if err != nil {
			return false
		}
		for _, s := range st.Configuration {
			if strings.HasPrefix(s.ID, "n4~") {
				return true
			}
		}
		return false
	})
	admin := newClient(t, client.WithAddrs(honest...))
	if _, err := admin.CreateJob("after-n4"); err != nil {
		t.Fatal(err)
	}
	c.WaitFor("the cluster's nodes to converge", time.Minute, func() bool {
		_, ok := proccluster.SameState(context.Background(), honest)
		return ok
	})
	st := statusOf(t, n4)
	if st.Servers != 0 || st.LastIndex != 0 || st.FSM.Jobs != 0 {
		t.Fatalf("the node of another cluster key received Raft state: %d servers, last index %d, %d jobs", st.Servers, st.LastIndex, st.FSM.Jobs)
	}
	if !strings.Contains(procs.LogTail([]*proccluster.Proc{c.Leader()}, 400), "certificate signed by unknown authority") {
		t.Fatal("the leader does not log why it cannot reach n4")
	}
}

// TestSecurityRaftForgedAppendEntriesWithCredentialsOfNonMember: an
// AppendEntries over mutual TLS with a certificate of another cluster key
// is refused at the handshake, and one from a certificate of the
// cluster's own key for a node the configuration does not list is refused
// at admission: neither is answered, and nothing is applied.
func TestSecurityRaftForgedAppendEntriesWithCredentialsOfNonMember(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	leader := c.Leader()
	fol := c.Others(leader)[0]
	before := statusOf(t, fol).FSM.Jobs
	key, err := certs.ReadClusterKey(c.KeyArgs[1])
	if err != nil {
		t.Fatal(err)
	}
	leaderName := raftnode.NameOf(statusOf(t, leader).NodeID)
	for name, k := range map[string][]byte{"another cluster key, posing as the leader": certs.NewClusterKey(), "the cluster's key, a node it does not list": key} {
		id := leaderName
		if bytesEqual(k, key) {
			id = "n9"
		}
		store, err := certs.FromClusterKey(k, id, []string{"127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		dial := func(addr string, timeout time.Duration) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			conf := store.PeerClient(host, fol.ID)
			conf.VerifyConnection = nil // the forger trusts anyone: the follower must refuse
			d := tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: conf}
			conn, err := d.Dial("tcp", addr)
			if err != nil {
				return nil, err
			}
			// Under TLS 1.3 the server's refusal of the client's
			// certificate arrives after the client's handshake: the RPC
			// then fails on its answer.
			return conn, nil
		}
		accepted, err := forgeCreateJob(t, fol, "forged", dial)
		if accepted || err == nil {
			t.Fatalf("%s: the follower answered a forged AppendEntries (accepted %v, error %v)", name, accepted, err)
		}
	}
	admin := newClient(t, client.WithAddrs(c.APIAddrs()...))
	if _, err := admin.CreateJob("real"); err != nil {
		t.Fatal(err)
	}
	c.Converged(time.Minute)
	if jobs := statusOf(t, fol).FSM.Jobs; jobs != before+1 {
		t.Fatalf("%s holds %d jobs, want %d", fol.ID, jobs, before+1)
	}
	if !strings.Contains(procs.LogTail([]*proccluster.Proc{fol}, 400), "which is not in this node's configuration") {
		t.Fatal("the follower does not log why it refused n9")
	}
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

// TestSecurityRaftNodeCertificateBoundToNodeID: with certificates of
// raftmaster tls gen --node-ids, each node presents its own, which names
// it. When a host that holds n1's certificate takes over n4's Raft
// address, the leader, dialling n4, meets n1's certificate and refuses it,
// while the cluster goes on committing.
func TestSecurityRaftNodeCertificateBoundToNodeID(t *testing.T) {
	needsProcesses(t)
	bin := proccluster.Binary(t)
	dir := t.TempDir()
	if out, err := exec.Command(bin, "tls", "gen", "--out", dir, "--hosts", "127.0.0.1,localhost", "--node-ids", "n1,n2,n3,n4").CombinedOutput(); err != nil {
		t.Fatalf("tls gen --node-ids: %v\n%s", err, out)
	}
	caFile := filepath.Join(dir, certs.CAFile)
	t.Setenv("RAFTMASTER_TLS_CA", caFile)
	nodeFlags := func(id string) []string {
		return []string{"--tls-cert", filepath.Join(dir, certs.NodeIDCertFile(id)), "--tls-key", filepath.Join(dir, certs.NodeIDKeyFile(id)), "--tls-ca", caFile}
	}
	c := proccluster.Start(t, proccluster.Options{Uncredentialed: true, Prepare: func(ps []*proccluster.Proc) map[string][]string {
		extra := map[string][]string{}
		for _, p := range ps {
			extra[p.ID] = nodeFlags(p.ID)
		}
		return extra
	}})
	c.WaitReady()
	n4 := c.AddProc("n4", []string{c.Leader().APIAddr}, nodeFlags("n4")...)
	c.WaitReady()
	c.Kill(n4)
	// The impostor: n1's certificate on n4's Raft address.
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, certs.NodeIDCertFile("n1")), filepath.Join(dir, certs.NodeIDKeyFile("n1")))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", n4.RaftAddr, &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAnyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_, _ = io.Copy(io.Discard, conn)
			}()
		}
	}()
	c.WaitFor("the leader to refuse n1's certificate at n4's address", time.Minute, func() bool {
		return strings.Contains(procs.LogTail([]*proccluster.Proc{c.Leader()}, 400), `presented the certificate of node \"n1\", not of \"n4\"`)
	})
	conf, err := certs.ClientTLS(caFile)
	if err != nil {
		t.Fatal(err)
	}
	admin := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithTLS(conf))
	if _, err := admin.CreateJob("after-n4"); err != nil {
		t.Fatal(err)
	}
	c.Converged(time.Minute)
}
