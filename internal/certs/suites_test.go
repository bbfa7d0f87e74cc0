package certs

import (
	"crypto/tls"
	"testing"
)

// TestTLSRefusesCBCSuites: a TLS 1.2 client that offers only a CBC-SHA1
// suite is refused by the API and by Raft's listener, and one that
// offers an ECDHE AEAD suite is served.
func TestTLSRefusesCBCSuites(t *testing.T) {
	dir := t.TempDir()
	gen(t, dir)
	s := load(t, dir)
	for name, server := range map[string]*tls.Config{"API": s.APIServer(), "Raft": s.PeerServer()} {
		cbc := s.Client("127.0.0.1")
		cbc.MaxVersion = tls.VersionTLS12
		cbc.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}
		if serr, cerr := handshake(server, cbc); serr == nil || cerr == nil {
			t.Fatalf("%s: a TLS 1.2 handshake with only TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA succeeded (server %v, client %v)", name, serr, cerr)
		}
		aead := s.Client("127.0.0.1")
		aead.MaxVersion = tls.VersionTLS12
		aead.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
		if serr, cerr := handshake(server, aead); serr != nil || cerr != nil {
			t.Fatalf("%s: TLS 1.2 with AES-GCM: server %v, client %v", name, serr, cerr)
		}
	}
}
