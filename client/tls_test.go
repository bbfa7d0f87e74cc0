package client_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
)

// tlsServer serves h over HTTPS and returns its "host:port" and a client
// configuration that trusts it.
func tlsServer(t *testing.T, h http.Handler) (string, *tls.Config) {
	t.Helper()
	ts := httptest.NewTLSServer(h)
	t.Cleanup(ts.Close)
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	return strings.TrimPrefix(ts.URL, "https://"), &tls.Config{RootCAs: pool}
}

// TestWithTLSSpeaksHTTPSToBareAddresses: under WithTLS an address without
// a scheme is HTTPS, and the server is verified against the given CA.
func TestWithTLSSpeaksHTTPSToBareAddresses(t *testing.T) {
	addr, conf := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"node_id":"n1","ready":true}`))
	}))
	c := newClient(t, client.WithAddrs(addr), client.WithTLS(conf))
	st, err := c.Status()
	if err != nil || st.NodeID != "n1" {
		t.Fatalf("Status over TLS: %+v, %v", st, err)
	}
	// Without the CA the server is not trusted.
	untrusting := newClient(t, client.WithAddrs(addr), client.WithTLS(&tls.Config{}), client.WithRetry(0))
	if _, err := untrusting.Status(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Status without the CA: %v, want a certificate error", err)
	}
}

// TestWithTLSRefusesARedirectToPlainHTTP: a client that uses TLS does not
// follow a redirect that would send its request, token included, in the
// clear.
func TestWithTLSRefusesARedirectToPlainHTTP(t *testing.T) {
	var plainHits counter
	plain := httptest.NewServer(plainHits.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	})))
	t.Cleanup(plain.Close)
	addr, conf := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	c := newClient(t, client.WithAddrs(addr), client.WithTLS(conf), client.WithToken("a-trainer-token-0123"), client.WithRetry(time.Second))
	_, err := c.RequestSaveModel("t0", time.Second)
	if err == nil || !strings.Contains(err.Error(), "plain HTTP") {
		t.Fatalf("RequestSaveModel: %v, want a refused redirect", err)
	}
	if plainHits.total() != 0 {
		t.Fatalf("the plain-HTTP server got %d requests", plainHits.total())
	}
}

// TestWithTLSAndWithHTTPClientConflict: the two options cannot both
// configure the transport.
func TestWithTLSAndWithHTTPClientConflict(t *testing.T) {
	_, err := client.NewClient(client.WithAddrs("127.0.0.1:1"), client.WithTLS(&tls.Config{}), client.WithHTTPClient(&http.Client{}))
	if err == nil {
		t.Fatal("WithTLS with WithHTTPClient accepted")
	}
	if _, err := client.NewClient(client.WithAddrs("127.0.0.1:1"), client.WithTLS(nil)); err == nil {
		t.Fatal("WithTLS(nil) accepted")
	}
}

// TestWithTLSRefusesPlainHTTPAddresses: under TLS, an address that names
// plain HTTP is refused rather than sent the token in the clear; a caller's
// transport configured for TLS gets the same rules as WithTLS.
func TestWithTLSRefusesPlainHTTPAddresses(t *testing.T) {
	if _, err := client.NewClient(client.WithAddrs("http://127.0.0.1:1"), client.WithTLS(&tls.Config{})); err == nil || !strings.Contains(err.Error(), "plain HTTP") {
		t.Fatalf("WithTLS with an http:// address: %v", err)
	}
	addr, conf := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"node_id":"n1","ready":true}`))
	}))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}
	c := newClient(t, client.WithAddrs(addr), client.WithHTTPClient(hc))
	if st, err := c.Status(); err != nil || st.NodeID != "n1" {
		t.Fatalf("Status through a caller's TLS transport and a bare address: %+v, %v", st, err)
	}
}
