package raftnode

import (
	"crypto/x509"
	"fmt"
	"net"

	"github.com/raftmaster/raftmaster/internal/certs"
)

// admits is the members-only check of Raft's port under TLS: a peer whose
// certificate the cluster's CA signed may send Raft RPCs only while the
// node's latest configuration lists it. A certificate that names a node
// (certs.NodeURI: a cluster key's, tls gen --node-ids) is admitted when a
// server of that name is in the configuration; one that names none, when
// it is valid for the host of a server's Raft address. A node with no
// configuration yet (a founder before its bootstrap, a node waiting to be
// added) admits any node certificate of the CA: the leader that adds it
// must reach it. Probes are answered without this check: they change
// nothing and tell a node with an empty data directory whether a cluster
// exists.
func (n *Node) admits(cert *x509.Certificate) error {
	r := n.rp.Load()
	if r == nil {
		return fmt.Errorf("raft is not running yet")
	}
	servers := r.GetConfiguration().Configuration().Servers
	if len(servers) == 0 {
		return nil
	}
	name, named := certs.NodeName(cert)
	for _, s := range servers {
		if named {
			if NameOf(string(s.ID)) == name {
				return nil
			}
			continue
		}
		if host, _, err := net.SplitHostPort(string(s.Address)); err == nil && cert.VerifyHostname(host) == nil {
			return nil
		}
	}
	if named {
		return fmt.Errorf("the peer's certificate names node %q, which is not in this node's configuration", name)
	}
	return fmt.Errorf("the peer's certificate (%q) is valid for no Raft address of this node's configuration", cert.Subject.CommonName)
}
