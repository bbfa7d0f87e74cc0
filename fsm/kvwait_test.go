package fsm

import "testing"

// TestKVWatchWaitWakesOnlyItsKey: a wait on key "k" of the default job
// is not woken by writes to other keys, to "k" of another job, or by
// other commands; every write or delete of "k", the deletion of its job
// and a restore wake it. Nothing is left registered once the waits are
// released.
func TestKVWatchWaitWakesOnlyItsKey(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol5})
	look := func() *KVWait {
		t.Helper()
		_, w := h.f.KVWatchWait("", "k")
		return w
	}
	w := look()
	quiet := func(what string) {
		t.Helper()
		if fired(w.C) {
			t.Fatalf("%s woke the wait on key k", what)
		}
	}
	h.ok(&KVCompareAndSet{Key: "other", Value: []byte("x")})
	h.ok(&KVAdd{Key: "n", Delta: 1})
	h.ok(&KVMultiSet{Pairs: []KVPair{{Key: "a", Value: []byte("1")}, {Key: "kk", Value: []byte("2")}}})
	h.ok(&KVDelete{Key: "other"})
	quiet("writes to other keys")
	h.ok(in("b", &KVCompareAndSet{Key: "k", Value: []byte("b")}))
	h.ok(in("b", &DeleteJob{}))
	quiet("a write to key k of another job, and that job's deletion")
	h.ok(&KVCompareAndSet{Key: "k", Version: 12345, Value: []byte("x")})
	h.tick()
	quiet("a compare-and-set that did not swap, and a tick")

	writes := []struct {
		name string
		c    Command
	}{
		{"compare-and-set", &KVCompareAndSet{Key: "k", Value: []byte("v")}},
		{"append", &KVAppend{Key: "k", Value: []byte("w")}},
		{"compare-value", &KVCompareValue{Key: "k", Expected: []byte("vw"), Desired: []byte("1")}},
		{"add", &KVAdd{Key: "k", Delta: 1}},
		{"multi-set", &KVMultiSet{Pairs: []KVPair{{Key: "a", Value: []byte("3")}, {Key: "k", Value: []byte("4")}}}},
		{"delete", &KVDelete{Key: "k"}},
		{"multi-set again", &KVMultiSet{Pairs: []KVPair{{Key: "k", Value: []byte("5")}}}},
		{"prefix delete", &KVDeletePrefix{Prefix: "k"}},
	}
	for _, wr := range writes {
		h.ok(wr.c)
		if !fired(w.C) {
			t.Fatalf("a %s of key k did not wake its wait", wr.name)
		}
		w.Release()
		w = look()
	}

	// A second wait on the key shares the first's fate; a release of one
	// leaves the other registered.
	w2 := look()
	w2.Release()
	w2.Release() // a second release does nothing
	h.ok(&KVCompareAndSet{Key: "k", Value: []byte("x")})
	if !fired(w.C) {
		t.Fatalf("a write did not wake the wait left after another was released")
	}
	w.Release()

	// The deletion of the job wakes every wait on its keys.
	w, w2 = look(), h.kvWait("", "absent")
	h.ok(&DeleteJob{Header: Header{Job: DefaultJob}})
	if !fired(w.C) || !fired(w2.C) {
		t.Fatalf("deleting the job did not wake the waits on its keys")
	}
	w.Release()
	w2.Release()
	if v, w := h.f.KVWatchWait("", "k"); v.Found {
		t.Fatalf("key k of a deleted job reads %+v", v)
	} else {
		w.Release()
	}

	// A restore wakes every wait.
	h.ok(&KVCompareAndSet{Key: "k", Value: []byte("y")})
	w = look()
	if err := h.f.Restore(readCloser(h.f.SnapshotBytes())); err != nil {
		t.Fatal(err)
	}
	if !fired(w.C) {
		t.Fatalf("a restore did not wake the wait")
	}
	w.Release()
	var nilWait *KVWait
	nilWait.Release()

	h.f.notifyMu.Lock()
	defer h.f.notifyMu.Unlock()
	if len(h.f.kvWaits) != 0 {
		t.Fatalf("waits left registered after every release: %v", h.f.kvWaits)
	}
}

// kvWait registers a wait on key of job and checks the value it read.
func (h *harness) kvWait(job, key string) *KVWait {
	h.t.Helper()
	v, w := h.f.KVWatchWait(job, key)
	if want := h.f.KV(job, key); v.Found != want.Found || v.Version != want.Version || string(v.Value) != string(want.Value) {
		h.t.Fatalf("KVWatchWait read %+v, KV %+v", v, want)
	}
	return w
}
