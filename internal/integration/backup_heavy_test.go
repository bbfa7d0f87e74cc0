//go:build heavy

package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/backup"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// nextEraHash returns the SHA-256 and the length of the state of the
// backup file in the next era, streamed.
func nextEraHash(t *testing.T, file string) (string, int64) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	bf, err := backup.Open(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(bf.CopyState(pw)) }()
	sum := sha256.New()
	counted := &countingWriter{w: sum}
	if err := fsm.NextEra(counted, pr); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(sum.Sum(nil)), counted.n
}

// countingWriter counts what it passes on.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// heavyValue is the value of key i of the heavy test's register: size
// bytes that only i gives.
func heavyValue(i, size int) []byte {
	b := make([]byte, size)
	rand.NewChaCha8([32]byte{0: byte(i), 1: byte(i >> 8), 2: byte(i >> 16)}).Read(b)
	return b
}

// heavyRun runs the raftmaster binary, and returns its stdout and the
// peak resident memory of the process in bytes, as /proc last showed it
// (the rusage of a child started by a large test process counts the
// parent's memory too).
func heavyRun(t *testing.T, bin string, args ...string) (string, int64, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		return "", 0, err
	}
	done := make(chan struct{})
	var peak atomic.Int64
	go func() {
		status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if b, err := os.ReadFile(status); err == nil {
				if m := vmHWM.FindSubmatch(b); m != nil {
					kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
					peak.Store(max(peak.Load(), kb<<10))
				}
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	t.Logf("raftmaster %s: stderr %q", args[0], errOut.String())
	if err != nil {
		return out.String(), peak.Load(), fmt.Errorf("%v: %s", err, errOut.String())
	}
	return out.String(), peak.Load(), nil
}

// vmHWM finds the peak resident set size in /proc/PID/status.
var vmHWM = regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB$`)

// TestHeavyBackupAndRestore fills a 3-node cluster of real processes with
// more than 500 MiB of state (register values of 1 MiB; RAFTMASTER_HEAVY_MIB
// sets another size), takes a backup with `raftmaster backup`, restores it
// with `raftmaster restore` into a fresh data directory and starts a node
// from it: the snapshot it writes is the backup's state in the next era, and the node
// serves every key, a sample of values checked byte for byte. The CLI
// streams both ways, so neither process holds the state in memory.
func TestHeavyBackupAndRestore(t *testing.T) {
	needsProcesses(t)
	mib := 520
	if s := os.Getenv("RAFTMASTER_HEAVY_MIB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			t.Fatalf("RAFTMASTER_HEAVY_MIB=%q: want 1 to 1000", s)
		}
		mib = n
	}
	const valueSize = 1 << 20 // the default --max-kv-value-bytes
	keys := mib               // within the default --max-job-kv-keys, 1,024
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	at := client.WithAddrs(c.APIAddrs()...)

	start := time.Now()
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		cl := newClient(t, at)
		wg.Go(func() {
			for i := w; i < keys; i += writers {
				res, err := cl.KVCompareAndSet(context.Background(), fmt.Sprintf("key-%04d", i), 0, heavyValue(i, valueSize))
				if err == nil && !res.Swapped {
					err = fmt.Errorf("key-%04d was not stored: %+v", i, res)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	fill := time.Since(start)
	t.Logf("filled %d keys of %d bytes in %v", keys, valueSize, fill.Round(time.Millisecond))

	file := filepath.Join(t.TempDir(), "backup.bin")
	start = time.Now()
	out, backupRSS, err := heavyRun(t, c.Bin, "backup", "--addr", c.APIAddrs()[1], "--out", file)
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	backupTime := time.Since(start)
	m := regexp.MustCompile(`backup of index (\d+) \(state ([0-9a-f]{64}), (\d+) bytes\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("backup printed %q", out)
	}
	hash := m[2]
	size, _ := strconv.ParseInt(m[3], 10, 64)
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if size < int64(keys)*valueSize || fi.Mode().Perm() != 0o600 {
		t.Fatalf("a backup of %d bytes in a file of mode %v; want above %d bytes and 0600", size, fi.Mode().Perm(), int64(keys)*valueSize)
	}
	t.Logf("backup: %d bytes (file %d) in %v, %.1f MiB/s, peak RSS of the CLI %d MiB",
		size, fi.Size(), backupTime.Round(time.Millisecond), float64(size)/(1<<20)/backupTime.Seconds(), backupRSS>>20)

	dir := filepath.Join(t.TempDir(), "r1")
	raftAddr, apiAddr := proccluster.FreePort(t), proccluster.FreePort(t)
	start = time.Now()
	if _, restoreRSS, err := heavyRun(t, c.Bin, "restore", "--in", file, "--data-dir", dir, "--node-id", "r1", "--raft-addr", raftAddr); err != nil {
		t.Fatalf("restore: %v", err)
	} else {
		restoreTime := time.Since(start)
		t.Logf("restore: %v, %.1f MiB/s, peak RSS of the CLI %d MiB",
			restoreTime.Round(time.Millisecond), float64(size)/(1<<20)/restoreTime.Seconds(), restoreRSS>>20)
		// Streaming: neither command holds the state (the binary alone
		// takes some tens of MiB).
		for name, rss := range map[string]int64{"backup": backupRSS, "restore": restoreRSS} {
			if size >= 256<<20 && rss > size/2 {
				t.Errorf("raftmaster %s peaked at %d MiB of memory for a state of %d MiB", name, rss>>20, size>>20)
			}
		}
	}
	// The restored state is the backup's in the next era: the same bytes
	// but for the header (fsm.NextEra), streamed here as restore did.
	want, wantSize := nextEraHash(t, file)
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}

	rc := restoredSnapshot(t, dir)
	sum := sha256.New()
	n, err := io.Copy(sum, rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != want || n != wantSize {
		t.Fatalf("the restored state (%d bytes) hashes to %s; the backup's in the next era (%d bytes) to %s (the backup's own: %d bytes, %s)",
			n, got, wantSize, want, size, hash)
	}

	start = time.Now()
	node := exec.Command(c.Bin, "serve", "--node-id", "r1", "--data-dir", dir, "--raft-addr", raftAddr, "--http-addr", apiAddr, "--insecure")
	node.Stderr = io.Discard
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Process.Kill(); _ = node.Wait() })
	cl := newClient(t, client.WithAddrs(apiAddr))
	st, err := cl.Status()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the restored node leads after %v", time.Since(start).Round(time.Millisecond))
	job, err := cl.Job("default")
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader.ID != "r1" || job.KVKeys != keys {
		t.Fatalf("the restored node: leader %q, %d keys; want r1 and %d keys", st.Leader.ID, job.KVKeys, keys)
	}
	for _, i := range []int{0, 1, keys / 3, keys / 2, keys - 2, keys - 1} {
		v, err := cl.KVGet(context.Background(), fmt.Sprintf("key-%04d", i))
		if err != nil {
			t.Fatal(err)
		}
		if !v.Found || !bytes.Equal(v.Value, heavyValue(i, valueSize)) {
			t.Fatalf("key-%04d on the restored node: found %v, %d bytes, not the value stored", i, v.Found, len(v.Value))
		}
	}
}
