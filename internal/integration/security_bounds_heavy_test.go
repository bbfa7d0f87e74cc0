//go:build heavy

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestSecurityBoundsLogBytes: 1,100 writes of about 1 MiB to 4 keys, a
// state of 4 MiB, leave every node's memory and data directory sized by
// the state, not by the bytes written.
func TestSecurityBoundsLogBytes(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	cl := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithJob("big"))
	value := bytes.Repeat([]byte{0xa5}, 1<<20-1024)
	versions := make([]uint64, 4)
	for i := range 1100 {
		k := i % 4
		binary.LittleEndian.PutUint64(value, uint64(i))
		res, err := cl.KVCompareAndSet(context.Background(), fmt.Sprintf("key-%d", k), versions[k], value)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if !res.Swapped {
			t.Fatalf("write %d: not swapped (version %d, want %d)", i, res.Version, versions[k])
		}
		versions[k] = res.Version
	}
	for _, p := range c.Procs {
		t.Logf("%s after the writes: RSS %d MiB (peak %d MiB), data directory %d MiB", p.ID,
			procKiB(t, p, "VmRSS")>>10, procKiB(t, p, "VmHWM")>>10, dirBytes(t, p.DataDir)>>20)
	}
	for _, p := range c.Procs {
		c.WaitFor(p.ID+"'s data directory to shrink to at most 256 MiB", 3*time.Minute, func() bool {
			return dirBytes(t, p.DataDir) <= 256<<20
		})
		if rss := procKiB(t, p, "VmRSS"); rss > 512<<10 {
			t.Errorf("%s: RSS %d MiB, want at most 512 MiB", p.ID, rss>>10)
		}
	}
	// The state is whole on every node.
	for k := range 4 {
		v, err := cl.KVGet(context.Background(), fmt.Sprintf("key-%d", k))
		if err != nil || v.Version != versions[k] || len(v.Value) != len(value) {
			t.Fatalf("key-%d: version %d, %d bytes, %v", k, v.Version, len(v.Value), err)
		}
	}
	if _, ok := proccluster.SameState(context.Background(), c.APIAddrs()); !ok {
		c.WaitFor("the nodes to converge", time.Minute, func() bool {
			_, ok := proccluster.SameState(context.Background(), c.APIAddrs())
			return ok
		})
	}
}

// dirBytes is the size of the files under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // a snapshot being written or removed
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSecurityBoundsIdleConnections: connections that send nothing, or a
// body one byte at a time, are closed by the server.
func TestSecurityBoundsIdleConnections(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	leader := c.Leader()
	const idle = 2000
	var closed atomic.Int64
	var wg sync.WaitGroup
	var conns []net.Conn
	t.Cleanup(func() {
		for _, cn := range conns {
			cn.Close()
		}
	})
	watch := func(cn net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(io.Discard, cn) // returns once the server closes it
		closed.Add(1)
	}
	for range idle {
		cn, err := net.Dial("tcp", leader.APIAddr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, cn)
		wg.Add(1)
		go watch(cn)
	}
	// A body announced as 1 MiB, sent a byte a second.
	trickle, err := net.Dial("tcp", leader.APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	conns = append(conns, trickle)
	fmt.Fprintf(trickle, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", rpc.PathKVCompareAndSet, leader.APIAddr, 1<<20)
	var trickleClosed atomic.Bool
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		br := bufio.NewReader(trickle)
		_, _ = io.Copy(io.Discard, br)
		trickleClosed.Store(true)
	}()
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			if _, err := trickle.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	c.WaitFor("the server to close 2,000 idle connections and a trickling body", 3*time.Minute, func() bool {
		return closed.Load() == idle && trickleClosed.Load()
	})
	// The node still serves.
	if _, err := newClient(t, client.WithAddrs(c.APIAddrs()...)).KVGet(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
}
