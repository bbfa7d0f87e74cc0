package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/certs"
	"github.com/raftmaster/raftmaster/internal/etcdtest"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// procKiB reads a field of /proc/PID/status in KiB (VmRSS, VmHWM).
func procKiB(t *testing.T, p *proccluster.Proc, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		t.Fatalf("%s: %v", p.ID, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s %s %q: %v", p.ID, field, v, err)
			}
			return n
		}
	}
	t.Fatalf("%s: no %s in /proc status", p.ID, field)
	return 0
}

// postDataset posts a SetDataset body to addr's default job, as a client
// that gives up after timeout, and returns the status and the answer.
func postDataset(t *testing.T, addr, job string, globs []string, timeout time.Duration) (int, string, error) {
	t.Helper()
	body, _ := json.Marshal(rpc.SetDatasetRequest{Globs: globs})
	hc := &http.Client{Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Post("http://"+addr+rpc.JobPath(job, rpc.PathDataset), "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestSecurityBoundsGlob: a pattern that would walk the whole file system
// of a node without --dataset-root is refused at once with an error that
// says why, and the leader's memory stays where it was.
func TestSecurityBoundsGlob(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	leader := c.Leader()
	status, msg, err := postDataset(t, leader.APIAddr, "walk", []string{"/*/*/*/*/*/*/*/*"}, time.Minute)
	if err != nil {
		t.Fatalf("SetDataset /*/*/*/*/*/*/*/*: %v", err)
	}
	if status != http.StatusBadRequest || !strings.Contains(msg, "wildcards in 8 path elements, at most 4") {
		t.Fatalf("SetDataset /*/*/*/*/*/*/*/*: %d %s, want 400 naming the wildcard bound", status, msg)
	}
	if hwm := procKiB(t, leader, "VmHWM"); hwm > 256<<10 {
		t.Fatalf("the leader's peak RSS is %d MiB after the pattern, want at most 256 MiB", hwm>>10)
	}
	// A pattern of 4 wildcard levels over the whole file system is
	// expanded within the bound of entries and time, and answered: it
	// matches nothing, or more than the bounds allow.
	const wide = "/*/*/*/*.no-such-dataset"
	status, msg, err = postDataset(t, leader.APIAddr, "walk", []string{wide}, 3*time.Minute)
	if err != nil || status != http.StatusBadRequest {
		t.Fatalf("SetDataset %s: %d %s %v, want 400", wide, status, msg, err)
	}
	if hwm := procKiB(t, leader, "VmHWM"); hwm > 512<<10 {
		t.Fatalf("the leader's peak RSS is %d MiB after %s, want at most 512 MiB", hwm>>10, wide)
	}
	t.Logf("%s: %s; the leader's peak RSS %d MiB", wide, strings.TrimSpace(msg), procKiB(t, leader, "VmHWM")>>10)
}

// TestSecurityBoundsFIFO: a FIFO in the dataset root is refused as not a
// regular file, by name or through a pattern, and does not hold the job's
// dataset slot: the next request sets the dataset.
func TestSecurityBoundsFIFO(t *testing.T) {
	needsProcesses(t)
	root := t.TempDir()
	writeDataset(t, root, 20, 10, 5)
	if err := syscall.Mkfifo(filepath.Join(root, "pipe.recordio"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--dataset-root", root}})
	c.WaitReady()
	leader := c.Leader()
	for _, glob := range []string{"pipe.recordio", "*.recordio", filepath.Join(root, "pipe.recordio")} {
		status, msg, err := postDataset(t, leader.APIAddr, "fifo", []string{glob}, 30*time.Second)
		if err != nil {
			t.Fatalf("SetDataset %q: %v, want a refusal", glob, err)
		}
		if status != http.StatusBadRequest || !strings.Contains(msg, "not a regular file") {
			t.Fatalf("SetDataset %q: %d %s, want 400 not a regular file", glob, status, msg)
		}
	}
	status, msg, err := postDataset(t, leader.APIAddr, "fifo", []string{"train-*.recordio"}, 30*time.Second)
	if err != nil || status != http.StatusOK {
		t.Fatalf("SetDataset after the FIFO: %d %s %v", status, msg, err)
	}
}

// TestSecurityBoundsFileProbes: with and without --dataset-root, a
// request for a file the server can read but that is no dataset answers
// an error that quotes none of its bytes and not its size, and with a
// root, nothing outside the root is named, whether reached by an
// absolute path, a pattern or a symbolic link.
func TestSecurityBoundsFileProbes(t *testing.T) {
	needsProcesses(t)
	outside := t.TempDir()
	content := []byte("SECRET-LINE:abcdefghijklmnopqrstuvwxyz\n")
	content = append(content, bytes.Repeat([]byte("x"), 12345-len(content))...)
	secret := filepath.Join(outside, "shadowfile")
	if err := os.WriteFile(secret, content, 0o600); err != nil {
		t.Fatal(err)
	}
	leaks := []string{"SECR", "12345", "12325", "12329", "0x", fmt.Sprintf("%d", binary.LittleEndian.Uint32(content)), fmt.Sprintf("%d", binary.BigEndian.Uint32(content))}
	check := func(what, msg string, forbidden ...string) {
		t.Helper()
		for _, f := range append(forbidden, leaks...) {
			if strings.Contains(msg, f) {
				t.Errorf("%s: the answer %q holds %q", what, msg, f)
			}
		}
	}

	t.Run("no-root", func(t *testing.T) {
		c := proccluster.Start(t, proccluster.Options{})
		c.WaitReady()
		status, msg, err := postDataset(t, c.Leader().APIAddr, "probe", []string{secret}, time.Minute)
		if err != nil || status != http.StatusBadRequest {
			t.Fatalf("SetDataset %s: %d %s %v, want 400", secret, status, msg, err)
		}
		check("SetDataset of a file that is no dataset", msg)
	})
	t.Run("root", func(t *testing.T) {
		root := t.TempDir()
		writeDataset(t, root, 20, 10, 5)
		if err := os.Symlink(secret, filepath.Join(root, "link.recordio")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(root, "linkdir")); err != nil {
			t.Fatal(err)
		}
		c := proccluster.Start(t, proccluster.Options{Args: []string{"--dataset-root", root}})
		c.WaitReady()
		leader := c.Leader()
		before := stateHash(t, leader)
		for _, glob := range []string{
			secret, filepath.Join(outside, "sh*"), "../" + filepath.Base(outside) + "/sh*",
			"link.recordio", "linkdir/shadowfile", "linkdir/*", "*.recordio",
		} {
			status, msg, err := postDataset(t, leader.APIAddr, "probe", []string{glob}, time.Minute)
			if err != nil || status != http.StatusBadRequest {
				t.Fatalf("SetDataset %q: %d %s %v, want 400", glob, status, msg, err)
			}
			// An error may name the pattern as given, nothing else
			// outside the root.
			var forbidden []string
			if !strings.Contains(glob, outside) {
				forbidden = append(forbidden, outside)
			}
			if !strings.Contains(glob, "shadowfile") {
				forbidden = append(forbidden, "shadowfile")
			}
			check(fmt.Sprintf("SetDataset %q", glob), msg, forbidden...)
		}
		if after := stateHash(t, leader); after != before {
			t.Fatal("refused datasets changed the state")
		}
	})
}

// datasetBody streams a SetDataset request of about size bytes: a chunk
// list, without holding it in memory.
type datasetBody struct {
	left int
	buf  []byte
	done bool
}

func newDatasetBody(size int) *datasetBody {
	return &datasetBody{left: size, buf: []byte(`{"chunks":[`)}
}

func (b *datasetBody) Read(p []byte) (int, error) {
	if len(b.buf) == 0 {
		switch {
		case b.done:
			return 0, io.EOF
		case b.left <= 0:
			b.buf, b.done = []byte(`{"path":"/data/last","offset":0,"records":1}]}`), true
		default:
			b.buf = []byte(`{"path":"/data/train-00000.recordio","offset":123456,"records":1000},`)
		}
		b.left -= len(b.buf)
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

// TestSecurityBoundsFollowerBody: a follower sent large dataset bodies
// redirects to the leader without reading them, and its memory stays
// small.
func TestSecurityBoundsFollowerBody(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	f := follower(c)
	const size = 195 << 20
	var wg sync.WaitGroup
	statuses := make([]int, 3)
	errs := make([]error, 3)
	for i := range 3 {
		wg.Go(func() {
			hc := &http.Client{Timeout: 5 * time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			req, err := http.NewRequest(http.MethodPost, "http://"+f.APIAddr+rpc.JobPath(fmt.Sprintf("big%d", i), rpc.PathDataset), newDatasetBody(size))
			if err != nil {
				errs[i] = err
				return
			}
			req.ContentLength = -1
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	for i := range 3 {
		if errs[i] != nil || statuses[i] != http.StatusTemporaryRedirect {
			t.Errorf("a %d MiB body to a follower: %d %v, want 307", size>>20, statuses[i], errs[i])
		}
	}
	hwm := procKiB(t, f, "VmHWM")
	if hwm > 256<<10 {
		t.Fatalf("the follower's peak RSS is %d MiB after three %d MiB bodies, want at most 256 MiB", hwm>>10, size>>20)
	}
	t.Logf("the follower's peak RSS after three %d MiB bodies: %d MiB", size>>20, hwm>>10)
}

// TestSecurityBoundsMetricSeries: requests to jobs that do not exist add
// no metric series, and a deleted job's series go with it.
func TestSecurityBoundsMetricSeries(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	leader := c.Leader()
	series := func(job string) int {
		t.Helper()
		resp, err := http.Get("http://" + leader.APIAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for line := range strings.SplitSeq(string(b), "\n") {
			if !strings.HasPrefix(line, "#") && strings.Contains(line, `raftmaster_job="`+job) {
				n++
			}
		}
		return n
	}
	before := series("ghost-")
	const calls = 5000
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > calls {
					return
				}
				body := strings.NewReader(`{"meta":{"id":1,"epoch":1}}`)
				resp, err := http.Post("http://"+leader.APIAddr+rpc.JobPath(fmt.Sprintf("ghost-%d", i), rpc.PathTaskFinished), "application/json", body)
				if err != nil {
					failed.Store(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		t.Fatal(err)
	}
	if after := series("ghost-"); after != before {
		t.Fatalf("%d calls to unknown jobs: %d metric series of them, want %d", calls, after, before)
	}
	// A job's series go when it is deleted.
	cl := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithJob("doomed"))
	if _, err := cl.KVCompareAndSet(context.Background(), "k", 0, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if n := series("doomed"); n == 0 {
		t.Fatal("no metric series of job doomed after a write")
	}
	if err := cl.DeleteJob("doomed"); err != nil {
		t.Fatal(err)
	}
	c.WaitFor("job doomed's series to go", time.Minute, func() bool { return series("doomed") == 0 })
}

// TestSecurityBoundsEtcdTLSAuth: a master of the etcd backend serves
// through an etcd that requires TLS with client certificates and
// authentication, as a user whose role covers only its prefix. Without
// the credentials, a master does not get in.
func TestSecurityBoundsEtcdTLSAuth(t *testing.T) {
	needsProcesses(t)
	dir := t.TempDir()
	if _, err := certs.Generate(certs.GenerateOptions{Dir: dir, Hosts: []string{"127.0.0.1", "localhost"}}); err != nil {
		t.Fatal(err)
	}
	cert, key, ca := filepath.Join(dir, certs.NodeCertFile), filepath.Join(dir, certs.NodeKeyFile), filepath.Join(dir, certs.CAFile)
	e := etcdtest.StartTLS(t, &etcdtest.TLS{CertFile: cert, KeyFile: key, CAFile: ca})
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := certs.LoadCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 10 * time.Second,
		TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const password = "master-password-42"
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "root-password-42"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "master"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "master", "/master", clientv3.GetPrefixRangeEnd("/master"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserAdd(ctx, "master", password); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "master", "master"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("setting up etcd's authentication: %v", err)
		}
	}
	pwFile := filepath.Join(dir, "etcd-password")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := proccluster.StartEtcd(t, e.Endpoint, 1, "--etcd-cacert", ca, "--etcd-cert", cert, "--etcd-key", key,
		"--etcd-user", "master", "--etcd-password-file", pwFile)
	c.WaitReady()
	cl := newClient(t, client.WithAddrs(c.APIAddrs()...))
	res, err := cl.KVCompareAndSet(context.Background(), "k", 0, []byte("v"))
	if err != nil || !res.Swapped {
		t.Fatalf("a write through the master: %+v %v", res, err)
	}
	// The state is in etcd, under the prefix the user may use.
	if r, err := admin.Get(ctx, "/master/state"); err == nil {
		t.Fatalf("etcd answered a client that did not log in: %d keys", r.Count)
	}
	// A master that presents no password is refused by etcd and never
	// serves.
	bare := proccluster.StartEtcd(t, e.Endpoint, 1, "--etcd-cacert", ca, "--etcd-cert", cert, "--etcd-key", key)
	c.WaitFor("the master without a password to stop", time.Minute, func() bool { return !bare.Procs[0].Running() })
}
