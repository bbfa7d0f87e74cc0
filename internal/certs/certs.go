// Package certs holds a node's TLS material (its certificate and key and
// the cluster's CA), reloads it on demand (SIGHUP), and builds the TLS
// configurations of the HTTPS API, of the node's own HTTPS requests and of
// Raft's mutual TLS from whatever is loaded at the moment of each
// handshake. It also writes development certificates (Generate), and
// derives a cluster's CA and a node's certificate from a cluster key
// (FromClusterKey), which secure Raft with no PKI to run.
package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"time"
)

// material is one consistent load of the files.
type material struct {
	cert tls.Certificate
	leaf *x509.Certificate
	pool *x509.CertPool
}

// Store is a node's TLS material, swapped whole by Reload. It is safe for
// concurrent use.
type Store struct {
	certFile, keyFile, caFile string
	cur                       atomic.Pointer[material]
}

// Load reads the certificate, key and CA files. The certificate must match
// the key and chain to the CA, so that a mix-up fails at start-up rather
// than at the first handshake.
func Load(certFile, keyFile, caFile string) (*Store, error) {
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, errors.New("tls: the certificate, its key and the CA are all needed")
	}
	s := &Store{certFile: certFile, keyFile: keyFile, caFile: caFile}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the files again. On an error the material in use stays.
// A store derived from a cluster key (FromClusterKey) has no files: it
// keeps its material.
func (s *Store) Reload() error {
	if s.certFile == "" {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		return fmt.Errorf("tls: certificate %s and key %s: %w", s.certFile, s.keyFile, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("tls: certificate %s: %w", s.certFile, err)
	}
	pool, err := LoadCA(s.caFile)
	if err != nil {
		return err
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("tls: certificate %s is not signed by the CA in %s: %w", s.certFile, s.caFile, err)
	}
	if err := checkNodeUsage(leaf); err != nil {
		return fmt.Errorf("tls: certificate %s: %w", s.certFile, err)
	}
	s.cur.Store(&material{cert: cert, leaf: leaf, pool: pool})
	return nil
}

// LoadCA reads a PEM file of one or more CA certificates.
func LoadCA(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tls: CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls: CA %s: no PEM certificate in it", path)
	}
	return pool, nil
}

// NotAfter is when the loaded certificate expires.
func (s *Store) NotAfter() time.Time { return s.cur.Load().leaf.NotAfter }

// getCertificate hands out the certificate loaded now, to servers and
// clients alike.
func (s *Store) getCertificate() *tls.Certificate {
	c := s.cur.Load().cert
	return &c
}

// CipherSuites are the TLS 1.2 cipher suites every configuration of the
// package allows: ECDHE key exchange with an AEAD cipher (AES-GCM or
// ChaCha20-Poly1305). TLS 1.3's suites are all of that kind.
var CipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// APIServer is the TLS configuration of the HTTPS API. Clients need no
// certificate (tokens say who they are), but one they present must chain
// to the CA.
func (s *Store) APIServer() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: CipherSuites,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.cur.Load().server(tls.VerifyClientCertIfGiven), nil
		},
	}
}

// server is the configuration of a server that presents m's certificate
// and verifies the client's certificate, as auth says, against m's CA.
func (m *material) server(auth tls.ClientAuthType) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: CipherSuites,
		Certificates: []tls.Certificate{m.cert},
		ClientAuth:   auth,
		ClientCAs:    m.pool,
	}
}

// Client is the TLS configuration of a connection this node opens to
// serverName (a host name or IP address of another node): the peer must
// present a certificate for that name from the CA, and this node presents
// its own.
func (s *Store) Client(serverName string) *tls.Config {
	m := s.cur.Load()
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: CipherSuites,
		ServerName:   serverName,
		RootCAs:      m.pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.getCertificate(), nil
		},
	}
}

// PeerServer is the TLS configuration of Raft's listener: the peer must
// present a node certificate (see verifyNodeCert) from the CA.
func (s *Store) PeerServer() *tls.Config {
	c := s.cur.Load().server(tls.RequireAndVerifyClientCert)
	c.VerifyConnection = verifyNodeCert
	return c
}

// PeerClient is the TLS configuration of a Raft connection to the node
// whose id is node ("" when unknown) at host, the host of the Raft
// address dialled: both ends must hold node certificates from the CA. A
// peer certificate that names a node id (NodeURI) must name node; one that
// names none, or a dial that knows no node id, must be valid for host.
func (s *Store) PeerClient(host, node string) *tls.Config {
	m := s.cur.Load()
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: CipherSuites,
		// The chain, the usage and the node id or host are verified by
		// VerifyConnection, which crypto/tls calls all the same.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPeer(cs, m.pool, host, node)
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.getCertificate(), nil
		},
	}
}

// verifyPeer checks the certificate a Raft peer presented when dialled:
// it chains to the CA in pool, it is a node certificate, and it names node
// or, when it names no node or node is unknown, it is valid for host.
func verifyPeer(cs tls.ConnectionState, pool *x509.CertPool, host, node string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the peer presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("tls: the peer at %s: %w", host, err)
	}
	if err := checkNodeUsage(leaf); err != nil {
		return err
	}
	if name, ok := NodeName(leaf); ok && node != "" {
		if name != node {
			return fmt.Errorf("tls: the peer at %s presented the certificate of node %q, not of %q", host, name, node)
		}
		return nil
	}
	if err := leaf.VerifyHostname(host); err != nil {
		return fmt.Errorf("tls: the peer at %s: %w", host, err)
	}
	return nil
}

// verifyNodeCert admits only node certificates to Raft: ones valid for
// both server and client authentication. A client certificate of the same
// CA (a trainer's or an operator's, valid for client authentication only)
// cannot pose as a Raft peer.
func verifyNodeCert(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the peer presented no certificate")
	}
	return checkNodeUsage(cs.PeerCertificates[0])
}

// checkNodeUsage says whether c is a node certificate: valid for server
// and client authentication.
func checkNodeUsage(c *x509.Certificate) error {
	if !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		return fmt.Errorf("tls: %q is not a node certificate (it must be valid for server and client authentication)", c.Subject.CommonName)
	}
	return nil
}

// DialContext opens a TLS connection to addr ("host:port") with Client's
// configuration, for an http.Transport's DialTLSContext.
func (s *Store) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	d := tls.Dialer{Config: s.Client(host)}
	return d.DialContext(ctx, network, addr)
}

// ClientTLS is the TLS configuration of a client of the API that trusts
// the CA in caFile: the CLI's --tls-ca, the tests' RAFTMASTER_TLS_CA.
func ClientTLS(caFile string) (*tls.Config, error) {
	pool, err := LoadCA(caFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, CipherSuites: CipherSuites, RootCAs: pool}, nil
}

// Leaf is the node certificate in use.
func (s *Store) Leaf() *x509.Certificate { return s.cur.Load().leaf }
