package etcdkeys_test

import (
	"testing"

	"github.com/raftmaster/raftmaster/store/etcdkeys"
)

// TestLayoutIsTheOnEtcdFormat pins every key byte for byte: masters and
// clients of different releases, and those of the original PaddlePaddle
// master, find one another through them.
func TestLayoutIsTheOnEtcdFormat(t *testing.T) {
	want := etcdkeys.Layout{Lock: "/master/lock", Addr: "/master/addr", State: "/master/state", Members: "/master/members/"}
	if got := etcdkeys.Default(); got != want {
		t.Errorf("Default() = %+v, want %+v", got, want)
	}
	if etcdkeys.DefaultPrefix != "/master" {
		t.Errorf("DefaultPrefix = %q, want /master", etcdkeys.DefaultPrefix)
	}
	consts := etcdkeys.Layout{Lock: etcdkeys.DefaultLock, Addr: etcdkeys.DefaultAddr, State: etcdkeys.DefaultState, Members: etcdkeys.DefaultMembers}
	if consts != want {
		t.Errorf("the Default constants are %+v, want %+v", consts, want)
	}
	for _, prefix := range []string{"/jobs/a", "/jobs/a/"} {
		want := etcdkeys.Layout{Lock: "/jobs/a/lock", Addr: "/jobs/a/addr", State: "/jobs/a/state", Members: "/jobs/a/members/"}
		if got := etcdkeys.Under(prefix); got != want {
			t.Errorf("Under(%q) = %+v, want %+v", prefix, got, want)
		}
	}
}
