// Package etcdtest runs a real, embedded etcd server on 127.0.0.1 for tests
// of the etcd-backed parity mode.
package etcdtest

import (
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Etcd is a running single-member etcd.
type Etcd struct {
	e *embed.Etcd
	// Endpoint is the client URL, "http://127.0.0.1:port".
	Endpoint string
}

// MaxRequestBytes is the request limit of the test server: large enough
// for the saved state of the datasets the tests use.
const MaxRequestBytes = 8 << 20

// TLS configures an etcd that serves its clients over TLS only and
// requires a client certificate signed by CAFile.
type TLS struct {
	CertFile, KeyFile, CAFile string
}

// Start starts an etcd server in a temporary directory and stops it when
// the test ends.
func Start(t testing.TB) *Etcd {
	t.Helper()
	return StartTLS(t, nil)
}

// StartTLS is Start, serving clients over TLS when tc is set: Endpoint is
// then "https://127.0.0.1:port".
func StartTLS(t testing.TB, tc *TLS) *Etcd {
	t.Helper()
	var lastErr error
	for range 5 { // free ports can be taken between probe and listen
		s, err := start(t.TempDir(), tc)
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		lastErr = err
	}
	t.Fatalf("etcdtest: %v", lastErr)
	return nil
}

func start(dir string, tc *TLS) (*Etcd, error) {
	clientURL, err := freeURL()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		clientURL.Scheme = "https"
	}
	peerURL, err := freeURL()
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
	cfg.Dir = dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.ListenClientUrls = []url.URL{*clientURL}
	cfg.AdvertiseClientUrls = []url.URL{*clientURL}
	cfg.ListenPeerUrls = []url.URL{*peerURL}
	cfg.AdvertisePeerUrls = []url.URL{*peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.MaxRequestBytes = MaxRequestBytes
	if tc != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: tc.CertFile, KeyFile: tc.KeyFile, TrustedCAFile: tc.CAFile, ClientCertAuth: true}
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcd did not become ready in 60s")
	}
	return &Etcd{e: e, Endpoint: clientURL.String()}, nil
}

// Stop stops the server; it is safe to call twice.
func (s *Etcd) Stop() {
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

func freeURL() (*url.URL, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	return url.Parse("http://" + addr)
}
