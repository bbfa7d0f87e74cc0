package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/raftmaster/raftmaster/store/etcdkeys"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Default etcd keys, the ones the original master used (package etcdkeys
// holds the layout).
const (
	DefaultLockPath  = etcdkeys.DefaultLock
	DefaultAddrPath  = etcdkeys.DefaultAddr
	DefaultStatePath = etcdkeys.DefaultState
	// DefaultTTL is how long a dead master keeps the lock.
	DefaultTTL = 10 * time.Second
	// DefaultRequestTimeout bounds each etcd request.
	DefaultRequestTimeout = 10 * time.Second
)

// ErrNotOwner means this store does not hold the master lock, or lost it:
// another master may be active, so the state was not saved.
var ErrNotOwner = errors.New("store: this master does not hold the etcd lock")

// EtcdConfig configures an EtcdStore. Zero fields take the defaults.
type EtcdConfig struct {
	// Endpoints are etcd's client URLs or host:port pairs.
	Endpoints []string
	// Addr is the address this master publishes at AddrPath once it holds
	// the lock.
	Addr string
	// LockPath, AddrPath and StatePath are the etcd keys of the lock, the
	// active master's address and the saved state.
	LockPath, AddrPath, StatePath string
	// TTL is the lease of this master's session: after a crash, a standby
	// takes the lock within TTL. Whole seconds; at least 1s.
	TTL time.Duration
	// DialTimeout bounds the first connection; RequestTimeout each request.
	DialTimeout, RequestTimeout time.Duration
	// MaxStateBytes bounds a saved state; Save refuses a larger one with
	// ErrTooLarge before sending it. etcd's --max-request-bytes must allow
	// it (1.5 MiB by default, which DefaultMaxStateBytes fits under).
	MaxStateBytes int
	// Auth, when set, is how the client proves itself to etcd: TLS with
	// etcd's CA and a client certificate, a user and password, or both.
	Auth EtcdAuth
}

// EtcdAuth is how a client reaches an etcd that requires TLS or
// authentication.
type EtcdAuth struct {
	// TLS, when set, dials etcd over TLS: it holds the CA that signs
	// etcd's certificate and, for etcd's --client-cert-auth, a client
	// certificate.
	TLS *tls.Config
	// Username and Password log in to etcd's authentication (etcdctl
	// user add); empty for none.
	Username, Password string
}

// DefaultMaxStateBytes fits a saved state and its transaction under etcd's
// default --max-request-bytes of 1.5 MiB.
const DefaultMaxStateBytes = 1_500_000

// ErrTooLarge means the state is larger than the store takes; nothing was
// saved.
var ErrTooLarge = errors.New("store: state too large")

func (c *EtcdConfig) setDefaults() error {
	if len(c.Endpoints) == 0 {
		return errors.New("store: no etcd endpoints")
	}
	if c.LockPath == "" {
		c.LockPath = DefaultLockPath
	}
	if c.AddrPath == "" {
		c.AddrPath = DefaultAddrPath
	}
	if c.StatePath == "" {
		c.StatePath = DefaultStatePath
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.TTL < time.Second {
		return fmt.Errorf("store: etcd session TTL %v is under 1s", c.TTL)
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MaxStateBytes == 0 {
		c.MaxStateBytes = DefaultMaxStateBytes
	}
	if c.MaxStateBytes < 0 {
		return fmt.Errorf("store: negative MaxStateBytes %d", c.MaxStateBytes)
	}
	return nil
}

// EtcdStore is a Store in etcd that also elects the active master. A master
// calls Lock, which waits until it holds the lock at LockPath and then
// publishes its address at AddrPath. Save only succeeds while the lock is
// held, in the same etcd transaction, so a deposed master can never
// overwrite its successor's state. The lock and the address are tied to the
// store's session lease: when the process dies they vanish after TTL.
type EtcdStore struct {
	cfg  EtcdConfig
	cli  *clientv3.Client
	sess *concurrency.Session
	mu   *concurrency.Mutex // used by Lock and Unlock only

	ownerMu  sync.Mutex
	owner    bool         // Lock succeeded and Unlock has not run
	ownerCmp clientv3.Cmp // holds in etcd while this store holds the lock
	lockGen  uint64       // counts successful Locks
}

// NewEtcdStore connects to etcd and opens a session. It does not take the
// lock; call Lock.
func NewEtcdStore(cfg EtcdConfig) (*EtcdStore, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	cli, err := NewEtcdClient(cfg.Endpoints, cfg.DialTimeout, cfg.MaxStateBytes+64<<10, cfg.Auth)
	if err != nil {
		return nil, err
	}
	// Grant the session's lease with a deadline: the client does not wait
	// for a connection when it is created, and a session would wait for
	// its lease forever.
	ctx, cancel := context.WithTimeout(context.Background(), cfg.RequestTimeout)
	defer cancel()
	lease, err := cli.Grant(ctx, int64(cfg.TTL/time.Second))
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("store: etcd at %v: %w", cfg.Endpoints, err)
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithLease(lease.ID), concurrency.WithTTL(int(cfg.TTL/time.Second)))
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("store: etcd session at %v: %w", cfg.Endpoints, err)
	}
	return &EtcdStore{cfg: cfg, cli: cli, sess: sess, mu: concurrency.NewMutex(sess, cfg.LockPath)}, nil
}

// NewEtcdClient returns an etcd client for endpoints. It does not wait for
// a connection: its first request does, within that request's deadline.
// dialTimeout bounds each connection attempt. maxSend, when positive,
// raises the client's limit on the size of one request. auth is how the
// client proves itself to etcd: TLS (give https:// endpoints), a user, or
// neither.
func NewEtcdClient(endpoints []string, dialTimeout time.Duration, maxSend int, auth EtcdAuth) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: dialTimeout, Logger: nopLogger(),
		TLS: auth.TLS, Username: auth.Username, Password: auth.Password}
	if maxSend > 0 {
		cfg.MaxCallSendMsgSize = maxSend
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("store: etcd at %v: %w", endpoints, err)
	}
	return cli, nil
}

// Config returns the store's configuration, defaults filled in.
func (s *EtcdStore) Config() EtcdConfig { return s.cfg }

// Client returns the store's etcd client.
func (s *EtcdStore) Client() *clientv3.Client { return s.cli }

// Lock waits until this store holds the master lock, then publishes Addr at
// AddrPath under the session lease. It returns early with ctx's error, or
// with an error when the session ends.
func (s *EtcdStore) Lock(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.sess.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := s.mu.Lock(ctx); err != nil {
		if s.sessionDone() {
			return fmt.Errorf("store: etcd session ended while waiting for %s", s.cfg.LockPath)
		}
		return fmt.Errorf("store: lock %s: %w", s.cfg.LockPath, err)
	}
	s.ownerMu.Lock()
	s.owner, s.ownerCmp = true, s.mu.IsOwner() // read here, where Lock wrote it
	s.lockGen++
	s.ownerMu.Unlock()
	rctx, rcancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer rcancel()
	owns, _ := s.isOwnerCmp()
	resp, err := s.cli.Txn(rctx).If(owns).
		Then(clientv3.OpPut(s.cfg.AddrPath, s.cfg.Addr, clientv3.WithLease(s.sess.Lease()))).Commit()
	if err != nil {
		return fmt.Errorf("store: publish %s: %w", s.cfg.AddrPath, err)
	}
	if !resp.Succeeded {
		return ErrNotOwner
	}
	return nil
}

// Unlock gives the lock up, so that a standby can take it. The address key
// is deleted with it when it is still this master's.
func (s *EtcdStore) Unlock(ctx context.Context) error {
	owns, ok := s.isOwnerCmp()
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.cli.Txn(ctx).If(owns, clientv3.Compare(clientv3.LeaseValue(s.cfg.AddrPath), "=", s.sess.Lease())).
		Then(clientv3.OpDelete(s.cfg.AddrPath)).Commit(); err != nil {
		return fmt.Errorf("store: unpublish %s: %w", s.cfg.AddrPath, err)
	}
	s.ownerMu.Lock()
	s.owner = false
	s.ownerMu.Unlock()
	if err := s.mu.Unlock(ctx); err != nil {
		return fmt.Errorf("store: unlock %s: %w", s.cfg.LockPath, err)
	}
	return nil
}

// LockGeneration counts the times this store took the lock, so that a
// caller can tell whether an ownership check was about the current term.
func (s *EtcdStore) LockGeneration() uint64 {
	s.ownerMu.Lock()
	defer s.ownerMu.Unlock()
	return s.lockGen
}

// isOwnerCmp is the etcd comparison that holds while this store holds the
// lock; ok is false when it does not think it holds it.
func (s *EtcdStore) isOwnerCmp() (cmp clientv3.Cmp, ok bool) {
	s.ownerMu.Lock()
	defer s.ownerMu.Unlock()
	return s.ownerCmp, s.owner
}

// IsOwner reports, with a round trip to etcd, whether this store holds the
// lock now.
func (s *EtcdStore) IsOwner(ctx context.Context) (bool, error) {
	owns, ok := s.isOwnerCmp()
	if !ok {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	resp, err := s.cli.Txn(ctx).If(owns).Commit()
	if err != nil {
		return false, fmt.Errorf("store: check %s: %w", s.cfg.LockPath, err)
	}
	return resp.Succeeded, nil
}

// Done is closed when the store's session ends: its lease expired or the
// store was shut down. A master must stop serving then.
func (s *EtcdStore) Done() <-chan struct{} { return s.sess.Done() }

func (s *EtcdStore) sessionDone() bool {
	select {
	case <-s.sess.Done():
		return true
	default:
		return false
	}
}

// Save implements Store. It writes state at StatePath if, and only if, this
// store holds the lock; otherwise it fails with ErrNotOwner.
func (s *EtcdStore) Save(state []byte) error {
	if len(state) > s.cfg.MaxStateBytes {
		return fmt.Errorf("%w: %d bytes, over the limit of %d", ErrTooLarge, len(state), s.cfg.MaxStateBytes)
	}
	owns, ok := s.isOwnerCmp()
	if !ok {
		return ErrNotOwner
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	resp, err := s.cli.Txn(ctx).If(owns).Then(clientv3.OpPut(s.cfg.StatePath, string(state))).Commit()
	if errors.Is(err, rpctypes.ErrRequestTooLarge) || status.Code(err) == codes.ResourceExhausted {
		return fmt.Errorf("%w: etcd refused %d bytes (raise its --max-request-bytes): %v", ErrTooLarge, len(state), err)
	}
	if err != nil {
		return fmt.Errorf("store: save %s (%d bytes): %w", s.cfg.StatePath, len(state), err)
	}
	if !resp.Succeeded {
		return ErrNotOwner
	}
	return nil
}

// Load implements Store: the state at StatePath, or nil when there is none.
func (s *EtcdStore) Load() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.cfg.StatePath)
	if err != nil {
		return nil, fmt.Errorf("store: load %s: %w", s.cfg.StatePath, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return resp.Kvs[0].Value, nil
}

// Shutdown implements Store: it gives up the lock, ends the session and
// closes the client.
func (s *EtcdStore) Shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	var err error
	if !s.sessionDone() {
		err = s.Unlock(ctx)
	}
	if cerr := s.sess.Close(); cerr != nil && err == nil && !errors.Is(cerr, context.Canceled) {
		err = fmt.Errorf("store: close etcd session: %w", cerr)
	}
	if cerr := s.cli.Close(); cerr != nil && err == nil && !errors.Is(cerr, context.Canceled) {
		err = fmt.Errorf("store: close etcd client: %w", cerr)
	}
	return err
}

var _ Store = (*EtcdStore)(nil)

// MasterAddr returns the address the active master published at addrPath,
// or "" when no master is active.
func MasterAddr(ctx context.Context, cli *clientv3.Client, addrPath string) (string, error) {
	resp, err := cli.Get(ctx, addrPath)
	if err != nil {
		return "", fmt.Errorf("store: read %s: %w", addrPath, err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// WatchMasterAddr calls found with the active master's address now and
// every time it changes ("" when none is active), until ctx is done.
func WatchMasterAddr(ctx context.Context, cli *clientv3.Client, addrPath string, found func(addr string)) {
	for ctx.Err() == nil {
		resp, err := cli.Get(ctx, addrPath)
		if err != nil {
			if !pause(ctx, time.Second) {
				return
			}
			continue
		}
		addr := ""
		if len(resp.Kvs) > 0 {
			addr = string(resp.Kvs[0].Value)
		}
		found(addr)
		wch := cli.Watch(clientv3.WithRequireLeader(ctx), addrPath, clientv3.WithRev(resp.Header.Revision+1))
		for wr := range wch {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					found("")
				} else {
					found(string(ev.Kv.Value))
				}
			}
		}
	}
}

// pause waits for d or until ctx is done; it reports whether d passed.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Lease returns the lease of the store's session; keys put with it vanish
// when the session ends.
func (s *EtcdStore) Lease() clientv3.LeaseID { return s.sess.Lease() }
