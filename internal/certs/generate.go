package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The files Generate writes into its directory.
const (
	CAFile         = "ca.crt"
	CAKeyFile      = "ca.key"
	NodeCertFile   = "node.crt"
	NodeKeyFile    = "node.key"
	ClientCertFile = "client.crt"
	ClientKeyFile  = "client.key"
)

// NodeIDCertFile and NodeIDKeyFile are the files of the node certificate
// Generate writes for node id (GenerateOptions.NodeIDs).
func NodeIDCertFile(id string) string { return "node-" + id + ".crt" }

// NodeIDKeyFile is the key of NodeIDCertFile(id).
func NodeIDKeyFile(id string) string { return "node-" + id + ".key" }

// GenerateOptions configure Generate.
type GenerateOptions struct {
	// Dir receives the files; it is created if needed.
	Dir string
	// Hosts are the names and IP addresses the node certificate is valid
	// for: every address nodes and clients reach a node at (wildcards
	// such as *.raftmaster.ns.svc.cluster.local are allowed).
	Hosts []string
	// Validity is how long the certificates are valid (default a year).
	Validity time.Duration
	// NodeIDs, when set, also get a node certificate each, that names the
	// node (NodeURI) besides Hosts: node-ID.crt and node-ID.key. A Raft
	// peer that presents one is checked against the node id it was dialled
	// as, and admitted only while the configuration lists that node.
	NodeIDs []string
	// Force overwrites existing files.
	Force bool
	// Now is the start of the validity (default time.Now).
	Now time.Time
}

// Generate writes a development CA, a node certificate for opts.Hosts
// (valid for server and client authentication, so that nodes present it
// both to clients and to each other) and a client certificate (client
// authentication only, so it cannot pose as a node), each with its key.
// Keys are ECDSA P-256, written with mode 0600. When the directory already
// holds a CA (ca.crt and ca.key), it is kept and the certificates are
// issued from it: rotating them, or adding hosts, needs no new trust. It
// refuses to overwrite a node or client file unless opts.Force.
// It returns the files it wrote.
func Generate(opts GenerateOptions) ([]string, error) {
	if len(opts.Hosts) == 0 {
		return nil, errors.New("tls gen: no host: the node certificate needs the names or addresses the nodes are reached at")
	}
	for _, h := range opts.Hosts {
		if h == "" || strings.ContainsAny(h, " /:,") && net.ParseIP(h) == nil {
			return nil, fmt.Errorf("tls gen: host %q: want a DNS name or an IP address", h)
		}
	}
	if opts.Validity <= 0 {
		opts.Validity = 365 * 24 * time.Hour
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	files := []string{NodeCertFile, NodeKeyFile, ClientCertFile, ClientKeyFile}
	for _, id := range opts.NodeIDs {
		if id == "" || strings.ContainsAny(id, " /:,#~") {
			return nil, fmt.Errorf("tls gen: node id %q: want a node's --node-id", id)
		}
		files = append(files, NodeIDCertFile(id), NodeIDKeyFile(id))
	}
	if !opts.Force {
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(opts.Dir, f)); err == nil {
				return nil, fmt.Errorf("tls gen: %s exists; pass --force to overwrite", filepath.Join(opts.Dir, f))
			}
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("tls gen: %w", err)
	}

	var out []pemFile
	ca, caKey, err := loadCA(opts.Dir)
	if errors.Is(err, os.ErrNotExist) {
		ca, caKey, out, err = newCA(opts)
	}
	if err != nil {
		return nil, err
	}

	node := template("raftmaster node", opts)
	node.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, h := range opts.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			node.IPAddresses = append(node.IPAddresses, ip)
		} else {
			node.DNSNames = append(node.DNSNames, h)
		}
	}
	client := template("raftmaster client", opts)
	client.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}

	type leafFile struct {
		tmpl            *x509.Certificate
		certFile, kFile string
	}
	leaves := []leafFile{{node, NodeCertFile, NodeKeyFile}, {client, ClientCertFile, ClientKeyFile}}
	for _, id := range opts.NodeIDs {
		named := template("raftmaster node "+id, opts)
		named.ExtKeyUsage, named.IPAddresses, named.DNSNames = node.ExtKeyUsage, node.IPAddresses, node.DNSNames
		named.URIs = []*url.URL{NodeURI(id)}
		leaves = append(leaves, leafFile{named, NodeIDCertFile(id), NodeIDKeyFile(id)})
	}
	for _, leaf := range leaves {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		der, err := x509.CreateCertificate(rand.Reader, leaf.tmpl, ca, key.Public(), caKey)
		if err != nil {
			return nil, err
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, err
		}
		out = append(out, pemFile{leaf.certFile, "CERTIFICATE", der, 0o644}, pemFile{leaf.kFile, "PRIVATE KEY", kder, 0o600})
	}
	var written []string
	for _, f := range out {
		path := filepath.Join(opts.Dir, f.name)
		if err := writeFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), f.mode); err != nil {
			return written, fmt.Errorf("tls gen: %w", err)
		}
		written = append(written, path)
	}
	return written, nil
}

// newCA makes a CA and returns it with the files to write.
func newCA(opts GenerateOptions) (*x509.Certificate, crypto.Signer, []pemFile, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := template("raftmaster development CA", opts)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return ca, key, []pemFile{{CAFile, "CERTIFICATE", der, 0o644}, {CAKeyFile, "PRIVATE KEY", kder, 0o600}}, nil
}

// loadCA reads the CA in dir; the error wraps os.ErrNotExist when dir
// holds neither of its files.
func loadCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, cerr := os.ReadFile(filepath.Join(dir, CAFile))
	keyPEM, kerr := os.ReadFile(filepath.Join(dir, CAKeyFile))
	switch {
	case errors.Is(cerr, os.ErrNotExist) && errors.Is(kerr, os.ErrNotExist):
		return nil, nil, fmt.Errorf("tls gen: no CA in %s: %w", dir, os.ErrNotExist)
	case cerr != nil:
		return nil, nil, fmt.Errorf("tls gen: the CA's key is there but its certificate is not: %w", cerr)
	case kerr != nil:
		return nil, nil, fmt.Errorf("tls gen: the CA's certificate is there but its key is not: %w", kerr)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("tls gen: the CA in %s: %w", dir, err)
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("tls gen: the CA in %s: %w", dir, err)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok || !ca.IsCA {
		return nil, nil, fmt.Errorf("tls gen: %s is not a CA certificate with a signing key", filepath.Join(dir, CAFile))
	}
	return ca, signer, nil
}

type pemFile struct {
	name string
	typ  string
	der  []byte
	mode os.FileMode
}

// template is a certificate valid from opts.Now for opts.Validity, with a
// random serial number.
func template(cn string, opts GenerateOptions) *x509.Certificate {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"raftmaster"}},
		NotBefore:    opts.Now.Add(-time.Hour),
		NotAfter:     opts.Now.Add(opts.Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it into place, so that a node reloading on SIGHUP never reads half a file.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
