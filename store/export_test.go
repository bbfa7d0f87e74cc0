package store

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// LeaseOf returns the lease of s's session.
func LeaseOf(t *testing.T, s *EtcdStore) clientv3.LeaseID {
	t.Helper()
	return s.sess.Lease()
}
