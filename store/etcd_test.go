package store_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/internal/etcdtest"
	"github.com/raftmaster/raftmaster/store"
)

func newStore(t *testing.T, endpoint, addr string) *store.EtcdStore {
	t.Helper()
	s, err := store.NewEtcdStore(store.EtcdConfig{Endpoints: []string{endpoint}, Addr: addr, TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown() })
	return s
}

func TestInMemStore(t *testing.T) {
	s := store.NewInMemStore()
	if b, err := s.Load(); err != nil || b != nil {
		t.Fatalf("empty store loads %q, %v", b, err)
	}
	in := []byte("state")
	if err := s.Save(in); err != nil {
		t.Fatal(err)
	}
	in[0] = 'X' // the store keeps its own copy
	if b, _ := s.Load(); string(b) != "state" {
		t.Fatalf("loaded %q", b)
	}
	s.Shutdown()
	if err := s.Save(in); !errors.Is(err, store.ErrShutdown) {
		t.Fatalf("save after shutdown: %v", err)
	}
}

func TestEtcdStoreSaveNeedsTheLock(t *testing.T) {
	e := etcdtest.Start(t)
	a := newStore(t, e.Endpoint, "a:8080")
	if err := a.Save([]byte("x")); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("save without the lock: %v, want ErrNotOwner", err)
	}
	if b, err := a.Load(); err != nil || b != nil {
		t.Fatalf("nothing saved, yet load gives %q, %v", b, err)
	}
	ctx := context.Background()
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	state := bytes.Repeat([]byte{0, 1, 2, 255}, 1<<18) // 1 MiB, binary
	if err := a.Save(state); err != nil {
		t.Fatal(err)
	}
	if b, err := a.Load(); err != nil || !bytes.Equal(b, state) {
		t.Fatalf("load after save: %d bytes, %v", len(b), err)
	}
	if addr, err := store.MasterAddr(ctx, a.Client(), store.DefaultAddrPath); err != nil || addr != "a:8080" {
		t.Fatalf("published address %q, %v", addr, err)
	}
}

// TestEtcdStoreFailover: a standby waits on the lock, takes it when the
// master gives it up, sees the master's last state, and the deposed master
// can no longer save.
func TestEtcdStoreFailover(t *testing.T) {
	e := etcdtest.Start(t)
	ctx := context.Background()
	a := newStore(t, e.Endpoint, "a:8080")
	b := newStore(t, e.Endpoint, "b:8080")
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Save([]byte("from a")); err != nil {
		t.Fatal(err)
	}
	locked := make(chan error, 1)
	go func() { locked <- b.Lock(ctx) }()
	select {
	case err := <-locked:
		t.Fatalf("standby took a held lock: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Load(); string(got) != "from a" {
		t.Fatalf("standby loads %q", got)
	}
	if err := a.Save([]byte("stale")); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("deposed master saved: %v", err)
	}
	if got, _ := b.Load(); string(got) != "from a" {
		t.Fatalf("state after a deposed save: %q", got)
	}
	if addr, _ := store.MasterAddr(ctx, b.Client(), store.DefaultAddrPath); addr != "b:8080" {
		t.Fatalf("published address %q, want b:8080", addr)
	}
}

// TestEtcdStoreDeadMaster: a master whose session ends (a crash) loses the
// lock and its address, and a standby takes over.
func TestEtcdStoreDeadMaster(t *testing.T) {
	e := etcdtest.Start(t)
	ctx := context.Background()
	a := newStore(t, e.Endpoint, "a:8080")
	b := newStore(t, e.Endpoint, "b:8080")
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	watched := make(chan string, 16)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go store.WatchMasterAddr(wctx, b.Client(), store.DefaultAddrPath, func(addr string) { watched <- addr })
	waitAddr(t, watched, "a:8080")
	// Revoke a's lease, as its expiry after a crash would.
	if _, err := a.Client().Revoke(ctx, store.LeaseOf(t, a)); err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waitAddr(t, watched, "b:8080")
	if err := a.Save([]byte("late")); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("dead master saved: %v", err)
	}
}

func waitAddr(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("master address never became %q", want)
		}
	}
}

func TestEtcdStoreRefusesATooLargeState(t *testing.T) {
	e := etcdtest.Start(t)
	s, err := store.NewEtcdStore(store.EtcdConfig{Endpoints: []string{e.Endpoint}, Addr: "a", MaxStateBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if err := s.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(make([]byte, 1000)); err != nil {
		t.Fatalf("a state at the limit: %v", err)
	}
	if err := s.Save(make([]byte, 1001)); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("a state over the limit: %v, want ErrTooLarge", err)
	}
	if got, _ := s.Load(); len(got) != 1000 {
		t.Fatalf("a refused save changed the state to %d bytes", len(got))
	}
}

// TestEtcdStoreUnreachable: with no etcd to talk to, NewEtcdStore fails
// within its request timeout instead of waiting for ever.
func TestEtcdStoreUnreachable(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		_, err := store.NewEtcdStore(store.EtcdConfig{Endpoints: []string{"127.0.0.1:1"}, RequestTimeout: time.Second, DialTimeout: time.Second})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("NewEtcdStore without an etcd succeeded")
		}
	case <-time.After(time.Minute):
		t.Fatal("NewEtcdStore without an etcd is still waiting after a minute")
	}
}
