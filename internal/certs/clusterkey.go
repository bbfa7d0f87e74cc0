package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// A cluster key is a secret every node of a cluster shares (serve
// --cluster-key-file, made by raftmaster keygen). Each node derives from
// it the same CA, a P-256 key and its certificate, and issues itself a
// node certificate for its node id and Raft address: Raft then runs over
// mutual TLS, encrypted and authenticated, with no PKI to run. Anyone who
// holds the key can make node certificates of the cluster: it must be as
// secret as a CA's key.

// ClusterKeyBytes is the size of a cluster key made by NewClusterKey, and
// the least a key file must hold.
const ClusterKeyBytes = 32

// NewClusterKey returns a random cluster key.
func NewClusterKey() []byte {
	k := make([]byte, ClusterKeyBytes)
	_, _ = rand.Read(k) // crypto/rand does not fail on Linux
	return k
}

// WriteClusterKey writes a new random cluster key to path, hex-encoded,
// with mode 0600. It refuses to overwrite a file unless force.
func WriteClusterKey(path string, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("keygen: %s exists; a new key would lock its cluster's nodes out of each other (pass --force to replace it)", path)
	}
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("keygen: %w", err)
	}
	if _, err := f.WriteString(hex.EncodeToString(NewClusterKey()) + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("keygen: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	return nil
}

// ReadClusterKey reads a cluster key file: hex or base64 text (white space
// around it is ignored) of at least ClusterKeyBytes bytes.
func ReadClusterKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster key: %w", err)
	}
	text := strings.TrimSpace(string(b))
	var key []byte
	if k, err := hex.DecodeString(text); err == nil {
		key = k
	} else if k, err := base64.StdEncoding.DecodeString(text); err == nil {
		key = k
	} else if k, err := base64.RawStdEncoding.DecodeString(text); err == nil {
		key = k
	} else {
		return nil, fmt.Errorf("cluster key %s: want hex or base64 text, as raftmaster keygen writes", path)
	}
	if len(key) < ClusterKeyBytes {
		return nil, fmt.Errorf("cluster key %s: %d bytes, want at least %d (make one with raftmaster keygen)", path, len(key), ClusterKeyBytes)
	}
	return key, nil
}

// NodeURIScheme and NodeURIHost form the URI SAN that names a node in its
// certificate: raftmaster://node/NODE-ID.
const (
	NodeURIScheme = "raftmaster"
	NodeURIHost   = "node"
)

// NodeURI is the URI SAN of node id name.
func NodeURI(name string) *url.URL {
	return &url.URL{Scheme: NodeURIScheme, Host: NodeURIHost, Path: "/" + name}
}

// NodeName returns the node id a certificate names in its URI SAN, if
// it names one.
func NodeName(c *x509.Certificate) (string, bool) {
	for _, u := range c.URIs {
		if u.Scheme == NodeURIScheme && u.Host == NodeURIHost {
			if name := strings.TrimPrefix(u.Path, "/"); name != "" {
				return name, true
			}
		}
	}
	return "", false
}

// derive reads n bytes of the key's derivation for purpose.
func derive(key []byte, purpose string, n int) ([]byte, error) {
	return hkdf.Key(sha256.New, key, []byte("raftmaster cluster key v1"), purpose, n)
}

// clusterCAKey derives the CA's P-256 key from the cluster key: the first
// 32-byte derivation that is a valid scalar (all but a 2^-32 chance, the
// first).
func clusterCAKey(key []byte) (*ecdsa.PrivateKey, error) {
	for i := range 64 {
		d, err := derive(key, fmt.Sprintf("ca key %d", i), 32)
		if err != nil {
			return nil, err
		}
		if k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d); err == nil {
			return k, nil
		}
	}
	return nil, errors.New("cluster key: no CA key could be derived")
}

// clusterCA derives the cluster's CA: every node derives a certificate of
// the same subject and key, so that each trusts the node certificates the
// others issue.
func clusterCA(key []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	caKey, err := clusterCAKey(key)
	if err != nil {
		return nil, nil, err
	}
	serial, err := derive(key, "ca serial", 16)
	if err != nil {
		return nil, nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(caKey.Public())
	if err != nil {
		return nil, nil, err
	}
	fp := sha256.Sum256(pub)
	tmpl := &x509.Certificate{
		SerialNumber:          new(big.Int).SetBytes(serial),
		Subject:               pkix.Name{CommonName: "raftmaster cluster CA " + hex.EncodeToString(fp[:6]), Organization: []string{"raftmaster"}},
		NotBefore:             time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2120, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, caKey, err
}

// FromClusterKey derives the cluster's CA from key and issues node name a
// certificate from it, valid for server and client authentication, that
// names the node (NodeURI) and each of hosts (names or IP addresses: the
// host of its Raft advertise address). The node certificate's key is new
// at every call; nothing is written to disk.
func FromClusterKey(key []byte, name string, hosts []string) (*Store, error) {
	if len(key) < ClusterKeyBytes {
		return nil, fmt.Errorf("cluster key: %d bytes, want at least %d", len(key), ClusterKeyBytes)
	}
	ca, caKey, err := clusterCA(key)
	if err != nil {
		return nil, err
	}
	nodeKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := template("raftmaster node "+name, GenerateOptions{Now: now, Validity: 10 * 365 * 24 * time.Hour})
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.URIs = []*url.URL{NodeURI(name)}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, nodeKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("cluster key: node certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	s := &Store{}
	s.cur.Store(&material{cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: nodeKey, Leaf: leaf}, leaf: leaf, pool: pool})
	return s, nil
}
