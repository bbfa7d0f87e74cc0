package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// cas returns a KVCompareAndSet of key in job.
func cas(job, key string, version uint64, value string) *KVCompareAndSet {
	return in(job, &KVCompareAndSet{Key: key, Version: version, Value: []byte(value)})
}

// wantKV fails the test unless r is the outcome swapped, with key at
// version holding value (found when version is not 0).
func (h *harness) wantKV(r *Result, swapped bool, version uint64, value string) {
	h.t.Helper()
	want := KVValue{Found: version != 0, Value: []byte(value), Version: version}
	if version == 0 {
		want.Value = nil
	}
	if r.Swapped != swapped || r.Ignored == swapped || r.KV == nil || !reflect.DeepEqual(*r.KV, want) {
		h.t.Fatalf("result %+v (KV %+v), want swapped %v and %+v", r, r.KV, swapped, want)
	}
}

// swap applies c and returns the version it stored, failing the test
// unless it swapped.
func (h *harness) swap(c *KVCompareAndSet) uint64 {
	h.t.Helper()
	r := h.ok(c)
	if !r.Swapped || r.KV == nil || r.KV.Version == 0 {
		h.t.Fatalf("%q: not swapped: %+v", c.Key, r)
	}
	return r.KV.Version
}

func TestKVCompareAndSet(t *testing.T) {
	runScenarios(t, []scenario{
		{"create, replace and refuse stale versions", func(h *harness) {
			r := h.ok(cas("", "rdzv", 0, "a"))
			h.wantKV(r, true, 1, "a")
			if got := h.f.KV(DefaultJob, "rdzv"); !got.Found || got.Version != 1 || string(got.Value) != "a" {
				h.t.Fatalf("KV %+v", got)
			}
			// Version 0 means "must not exist": the key exists.
			h.wantKV(h.ok(cas("", "rdzv", 0, "b")), false, 1, "a")
			h.wantKV(h.ok(cas("", "rdzv", 7, "b")), false, 1, "a")
			h.wantKV(h.ok(cas("", "rdzv", 1, "b")), true, 2, "b")
			// The old version no longer matches.
			h.wantKV(h.ok(cas("", "rdzv", 1, "c")), false, 2, "b")
			// An absent key answers not found, and nothing is created.
			h.wantKV(h.ok(cas("", "other", 3, "x")), false, 0, "")
			if ji, _ := h.f.Job(""); ji.KVKeys != 1 {
				h.t.Fatalf("job has %d keys, want 1", ji.KVKeys)
			}
			// An empty value is a value.
			h.wantKV(h.ok(cas("", "empty", 0, "")), true, 3, "")
			if got := h.f.KV("", "empty"); !got.Found || len(got.Value) != 0 {
				h.t.Fatalf("empty value reads %+v", got)
			}
		}},
		{"versions are unique across keys and jobs", func(h *harness) {
			seen := map[uint64]bool{}
			for _, c := range []*KVCompareAndSet{cas("a", "k", 0, "1"), cas("b", "k", 0, "1"), cas("a", "j", 0, "1")} {
				v := h.swap(c)
				if seen[v] {
					h.t.Fatalf("version %d given twice", v)
				}
				seen[v] = true
			}
			if a, b := h.f.KV("a", "k"), h.f.KV("b", "k"); a.Version == b.Version {
				h.t.Fatalf("two jobs' keys share version %d", a.Version)
			}
		}},
		{"a version never repeats after the job is deleted and created again", func(h *harness) {
			v1 := h.swap(cas("a", "k", 0, "1"))
			v2 := h.swap(cas("a", "k", v1, "2"))
			h.ok(&DeleteJob{Header: Header{Job: "a"}})
			if got := h.f.KV("a", "k"); got.Found {
				h.t.Fatalf("key survived its job: %+v", got)
			}
			// The old version does not match the absent key.
			h.wantKV(h.ok(cas("a", "k", v2, "3")), false, 0, "")
			if _, ok := h.f.Job("a"); ok {
				h.t.Fatalf("a compare-and-set that did not swap created the job")
			}
			v3 := h.swap(cas("a", "k", 0, "3"))
			if v3 <= v2 {
				h.t.Fatalf("version %d after %d", v3, v2)
			}
			// The state round-trips with the counter (newHarness checks
			// it at the end); a restored replica goes on from it.
			g := restored(t, h.f.SnapshotBytes())
			if r := g.ApplyEntry(100, Encode(cas("b", "k", 0, "x"))); r.KV == nil || r.KV.Version != v3+1 {
				h.t.Fatalf("restored replica gave %+v, want version %d", r.KV, v3+1)
			}
		}},
		{"the first swap creates the job", func(h *harness) {
			h.wantKV(h.ok(cas("new", "k", 5, "x")), false, 0, "")
			if _, ok := h.f.Job("new"); ok {
				h.t.Fatalf("job created by a compare-and-set that did not swap")
			}
			h.swap(cas("new", "k", 0, "x"))
			ji, ok := h.f.Job("new")
			if !ok || ji.KVKeys != 1 || ji.Bytes != emptyJobBytes("new")+kvBytes("k", []byte("x")) {
				h.t.Fatalf("job %+v, %v", ji, ok)
			}
		}},
		{"the size estimate follows the values", func(h *harness) {
			v := h.swap(cas("", "k", 0, "abc"))
			before := h.f.Stats("").StateBytes
			h.swap(cas("", "k", v, strings.Repeat("x", 100)))
			if got := h.f.Stats("").StateBytes; got != before+97 {
				h.t.Fatalf("state bytes %d, want %d", got, before+97)
			}
			checkEstimate(h.t, h.f)
		}},
		{"limits", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{MaxJobKVKeys: 2, MaxKVValueBytes: 4}})
			h.swap(cas("", "a", 0, "1234"))
			v := h.swap(cas("", "b", 0, ""))
			// A third key is refused; replacing a key is not.
			h.wantLimit(cas("", "c", 0, "x"), "limit max_job_kv_keys (2) exceeded")
			h.swap(cas("", "b", v, "x"))
			// A value over the limit is refused whatever the versions.
			r := h.wantLimit(cas("", "a", 99, "12345"), "limit max_kv_value_bytes (4) exceeded")
			if !strings.Contains(r.Message, `5 bytes for key "a"`) {
				h.t.Fatalf("message %q", r.Message)
			}
			// A key that would not be stored is answered even at the limit.
			h.wantKV(h.ok(cas("", "c", 3, "x")), false, 0, "")
			h.ok(&SetLimits{Limits: Limits{MaxStateBytes: h.f.Stats("").StateBytes + 1}})
			h.wantLimit(cas("", "b", h.f.KV("", "b").Version, "xyz"), "limit max_state_bytes")
		}},
		{"at max_jobs, one that cannot swap is answered as a compare-and-set", func(h *harness) {
			h.ok(&SetProtocol{Level: Protocol2})
			h.ok(&SetLimits{Limits: Limits{MaxJobs: 1}})
			h.swap(cas("a", "k", 0, "x"))
			jobs := h.f.Stats("").Jobs
			// The missing job holds no key: not swapped, found nothing,
			// and no job is created.
			r := h.ok(cas("b", "k", 7, "y"))
			h.wantKV(r, false, 0, "")
			if _, ok := h.f.Job("b"); ok || h.f.Stats("").Jobs != jobs {
				h.t.Fatalf("a compare-and-set that did not swap created its job")
			}
			// A retry replays it, the key still absent.
			retry := cas("b", "k", 7, "y")
			retry.Request = RequestID{Client: clientID(1), Seq: 1}
			h.wantKV(h.ok(retry), false, 0, "")
			if r := h.apply(retry); !r.Duplicate || r.Swapped || r.KV == nil || r.KV.Found {
				h.t.Fatalf("retry: %+v", r)
			}
			// One that would swap would create the job: that is still
			// refused at the limit.
			h.wantLimit(cas("b", "k", 0, "y"), "limit max_jobs (1) exceeded")
			// So is a value over its limit, whatever the versions.
			h.ok(&SetLimits{Limits: Limits{MaxJobs: 1, MaxKVValueBytes: 1}})
			h.wantLimit(cas("b", "k", 7, "yy"), "limit max_kv_value_bytes (1) exceeded")
		}},
		{"at max_jobs below Protocol2, one that cannot swap is refused as before", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{MaxJobs: 1}})
			h.swap(cas("a", "k", 0, "x"))
			h.wantLimit(cas("b", "k", 7, "y"), "limit max_jobs (1) exceeded")
		}},
		{"bad keys and values change nothing", func(h *harness) {
			h.swap(cas("", "k", 0, "v"))
			for _, key := range []string{"", strings.Repeat("k", MaxKVKeyLen+1), "a b", "tab\tkey", "new\nline", "nul\x00", "caf\xc3\xa9", "\x7f"} {
				r := h.rejects(cas("", key, 0, "v"))
				if !strings.Contains(r.Message, "printable ASCII") {
					h.t.Fatalf("key %q: message %q does not state the rule", key, r.Message)
				}
			}
			h.rejects(cas("", "k", 1, strings.Repeat("v", MaxKVValueBytesCeiling+1)))
			h.rejects(cas("Bad_Job", "k", 0, "v"))
			h.swap(cas("", strings.Repeat("k", MaxKVKeyLen), 0, "v"))
			h.swap(cas("", "!~/torch/elastic:rdzv", 0, "v"))
		}},
		{"limits out of range are refused", func(h *harness) {
			for _, l := range []Limits{{MaxJobKVKeys: -1}, {MaxJobKVKeys: MaxJobKVKeysCeiling + 1}, {MaxKVValueBytes: -1}, {MaxKVValueBytes: MaxKVValueBytesCeiling + 1}} {
				h.rejects(&SetLimits{Limits: l})
			}
		}},
	})
}

func TestKVDedup(t *testing.T) {
	runScenarios(t, []scenario{
		{"a retried swap answers the first outcome and changes nothing", func(h *harness) {
			first := h.ok(withRequest(cas("", "k", 0, "v1"), 1, 1))
			h.wantKV(first, true, 1, "v1")
			v := h.swap(cas("", "k", 1, "v2")) // another client moves on
			before := h.f.SnapshotBytes()
			h.advance(time.Second)
			retry := h.ok(withRequest(cas("", "k", 0, "v1"), 1, 1))
			if !retry.Duplicate || retry.Clock != first.Clock {
				h.t.Fatalf("retry %+v, want a duplicate of %+v", retry, first)
			}
			h.wantKV(retry, true, 1, "v1")
			if !bytes.Equal(before, h.f.SnapshotBytes()) {
				h.t.Fatalf("a retried compare-and-set changed the state")
			}
			if got := h.f.KV("", "k"); got.Version != v || string(got.Value) != "v2" {
				h.t.Fatalf("retry overwrote the key: %+v", got)
			}
		}},
		{"a retry that did not swap answers not swapped, never a second write", func(h *harness) {
			h.swap(cas("", "k", 0, "a"))
			first := h.ok(withRequest(cas("", "k", 0, "mine"), 2, 1))
			h.wantKV(first, false, 1, "a")
			// Unchanged since: the same answer.
			h.wantKV(h.ok(withRequest(cas("", "k", 0, "mine"), 2, 1)), false, 1, "a")
			// Changed since: the key as it is now, still not swapped.
			v := h.swap(cas("", "k", 1, "b"))
			r := h.ok(withRequest(cas("", "k", 0, "mine"), 2, 1))
			if !r.Duplicate {
				h.t.Fatalf("retry not marked duplicate: %+v", r)
			}
			h.wantKV(r, false, v, "b")
		}},
		{"a retry that would now swap is refused rather than contradicted", func(h *harness) {
			h.swap(cas("a", "k", 0, "a"))
			h.wantKV(h.ok(withRequest(cas("a", "k", 0, "mine"), 3, 1)), false, 1, "a")
			h.ok(&DeleteJob{Header: Header{Job: "a"}})
			before := h.f.SnapshotBytes()
			r := h.rejects(withRequest(cas("a", "k", 0, "mine"), 3, 1))
			if !strings.Contains(r.Message, "new request id") {
				h.t.Fatalf("message %q", r.Message)
			}
			if !bytes.Equal(before, h.f.SnapshotBytes()) || h.f.KV("a", "k").Found {
				h.t.Fatalf("the refused retry wrote")
			}
		}},
		{"a request id used for another command is refused", func(h *harness) {
			h.swap(withRequest(cas("", "k", 0, "a"), 4, 1).(*KVCompareAndSet))
			h.rejects(withRequest(&RemoveNode{ID: "n"}, 4, 1))
		}},
	})
}

// TestRestoreVersion3: a snapshot of version 3, written before the
// register existed, restores to the same jobs with empty registers and
// the default register limits, and goes on giving versions from 1.
func TestRestoreVersion3(t *testing.T) {
	var log [][]byte
	for _, b := range setupLog() {
		if c, _ := Decode(b); c.Type() != TypeKVCompareAndSet {
			log = append(log, b)
		}
	}
	orig := applyLog(log)
	h := &harness{t: t, f: orig, index: 100, now: t0 + int64(time.Second)}
	h.ok(&SetLimits{Limits: Limits{MaxJobs: 9, JobTTL: time.Hour}})
	var v3 bytes.Buffer
	if err := encodeStateVersion(&v3, orig.s, 3); err != nil {
		t.Fatal(err)
	}
	if b := v3.Bytes(); b[len(snapshotMagic)] != 3 || bytes.Equal(b, orig.SnapshotBytes()) {
		t.Fatalf("not a version 3 snapshot")
	}
	f := restored(t, v3.Bytes())
	if got, want := f.SnapshotBytes(), orig.SnapshotBytes(); !bytes.Equal(got, want) {
		t.Fatalf("version 3 restores to other state")
	}
	if got := f.Limits(); got.MaxJobKVKeys != DefaultMaxJobKVKeys || got.MaxKVValueBytes != DefaultMaxKVValueBytes || got.MaxJobs != 9 {
		t.Fatalf("limits %+v", got)
	}
	if r := f.ApplyEntry(200, Encode(&KVCompareAndSet{Header: Header{Now: t0 + int64(time.Minute)}, Key: "k", Value: []byte("v")})); !r.Swapped || r.KV.Version != 1 {
		t.Fatalf("first write after restore: %+v", r)
	}
	checkEstimate(t, f)
}

// TestRestoreRefusesBrokenKV: a register that no log could have produced
// refuses the snapshot.
func TestRestoreRefusesBrokenKV(t *testing.T) {
	setup := func() *state {
		f := applyLog(setupLog())
		for i, c := range []Command{cas("job-b", "a", 0, "1"), cas("job-b", "b", 0, "2"), cas("", "a", 0, "3")} {
			c.Hdr().Now = t0
			if r := f.ApplyEntry(uint64(100+i), Encode(c)); !r.Swapped {
				t.Fatalf("setup: %+v", r)
			}
		}
		return f.s
	}
	b := func(s *state) *job { return s.jobs["job-b"] }
	for _, tc := range []struct {
		name string
		fn   func(s *state)
	}{
		{"version 0", func(s *state) { b(s).kv["a"] = kvEntry{value: []byte("1")} }},
		{"version past the counter", func(s *state) { b(s).kv["a"] = kvEntry{value: []byte("1"), version: s.kvVersion + 1} }},
		{"a version twice in a job", func(s *state) { b(s).kv["a"] = b(s).kv["b"] }},
		{"a version twice across jobs", func(s *state) { b(s).kv["a"] = s.jobs[DefaultJob].kv["a"] }},
		{"bad key", func(s *state) { b(s).kv["a b"] = kvEntry{version: s.kvVersion + 1}; s.kvVersion++ }},
		{"oversized value", func(s *state) { b(s).kv["a"] = kvEntry{value: make([]byte, MaxKVValueBytesCeiling+1), version: 1} }},
		{"register limit out of range", func(s *state) { s.limits.MaxKVValueBytes = MaxKVValueBytesCeiling + 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := setup()
			tc.fn(s)
			var buf bytes.Buffer
			if err := encodeState(&buf, s); err != nil {
				t.Fatal(err)
			}
			wantRefused(t, buf.Bytes())
		})
	}
}

// TestSetLimitsEncoding: a SetLimits without register limits is written
// as before they existed, so that older replicas read it; one with them
// round-trips.
func TestSetLimitsEncoding(t *testing.T) {
	old := &SetLimits{Limits: Limits{MaxJobs: 3, JobTTL: time.Minute}}
	e := &encoder{}
	old.Limits.encode(e)
	if got := encodePayload(old); !bytes.Equal(got, e.buf) {
		t.Fatalf("payload %x, want the older form %x", got, e.buf)
	}
	for _, c := range []*SetLimits{old, {Limits: Limits{MaxJobKVKeys: 5}}, {Limits: Limits{MaxKVValueBytes: 9, MaxJobs: 1}}} {
		d, err := Decode(Encode(c))
		if err != nil || !reflect.DeepEqual(d.(*SetLimits).Limits, c.Limits) {
			t.Fatalf("%+v decodes to %+v, %v", c.Limits, d, err)
		}
	}
}

// runKVScenarios runs each scenario on a harness at Protocol5, the level
// of the register's deletes, add, multi-set, append and compare-by-value.
func runKVScenarios(t *testing.T, cases []scenario) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.ok(&SetProtocol{Level: Protocol5})
			tc.run(h)
		})
	}
}

// unchanged applies c and fails the test unless it was refused with code
// and left the state's bytes as they were.
func (h *harness) unchanged(c Command, code Code, msg string) *Result {
	h.t.Helper()
	before := h.f.SnapshotBytes()
	r := h.apply(c)
	if r.Code != code || !strings.Contains(r.Message, msg) {
		h.t.Fatalf("%v: %+v, want code %v with %q", c.Type(), r, code, msg)
	}
	if !bytes.Equal(before, h.f.SnapshotBytes()) {
		h.t.Fatalf("%v: a refused command changed the state", c.Type())
	}
	return r
}

func TestKVDelete(t *testing.T) {
	runKVScenarios(t, []scenario{
		{"delete, and a deleted version never comes back", func(h *harness) {
			v1 := h.swap(cas("a", "k", 0, "one"))
			v2 := h.swap(cas("a", "k", v1, "two"))
			h.swap(cas("a", "other", 0, "x"))
			bytesBefore := h.f.Stats("").StateBytes
			r := h.ok(in("a", &KVDelete{Key: "k"}))
			if r.Deleted != 1 || r.Ignored || r.KV == nil || !r.KV.Found || r.KV.Version != v2 || r.KV.Value != nil {
				h.t.Fatalf("delete: %+v (KV %+v)", r, r.KV)
			}
			if got := h.f.KV("a", "k"); got.Found {
				h.t.Fatalf("the key survived its delete: %+v", got)
			}
			if got := h.f.Stats("").StateBytes; got != bytesBefore-kvBytes("k", []byte("two")) {
				h.t.Fatalf("state bytes %d after the delete, want %d", got, bytesBefore-kvBytes("k", []byte("two")))
			}
			checkEstimate(h.t, h.f)
			// A compare-and-set fenced by any version the key had finds it
			// absent: the deleted value cannot be replaced, nor brought back.
			for _, v := range []uint64{v1, v2} {
				h.wantKV(h.ok(cas("a", "k", v, "resurrected")), false, 0, "")
			}
			// Created again, the key takes a version above every one it had.
			if v3 := h.swap(cas("a", "k", 0, "three")); v3 <= v2 {
				h.t.Fatalf("version %d after a delete of %d", v3, v2)
			}
			if got := h.f.KV("a", "other"); string(got.Value) != "x" {
				h.t.Fatalf("the delete touched another key: %+v", got)
			}
		}},
		{"an absent key is ignored", func(h *harness) {
			h.swap(cas("", "k", 0, "v"))
			r := h.ok(&KVDelete{Key: "absent"})
			if r.Deleted != 0 || !r.Ignored || r.KV == nil || r.KV.Found || r.KV.Version != 0 {
				h.t.Fatalf("delete of an absent key: %+v", r)
			}
			// A job that does not exist is not created by a delete.
			if r := h.ok(in("none", &KVDelete{Key: "k"})); !r.Ignored {
				h.t.Fatalf("delete in a job that does not exist: %+v", r)
			}
			if _, ok := h.f.Job("none"); ok {
				h.t.Fatal("a delete created its job")
			}
		}},
		{"a conditional delete deletes only its version", func(h *harness) {
			v1 := h.swap(cas("", "k", 0, "one"))
			v2 := h.swap(cas("", "k", v1, "two"))
			r := h.ok(&KVDelete{Key: "k", Version: v1})
			if r.Deleted != 0 || !r.Ignored || !r.KV.Found || r.KV.Version != v2 {
				h.t.Fatalf("delete of a stale version: %+v", r)
			}
			if got := h.f.KV("", "k"); got.Version != v2 {
				h.t.Fatalf("a stale delete changed the key: %+v", got)
			}
			if r := h.ok(&KVDelete{Key: "k", Version: v2}); r.Deleted != 1 || r.KV.Version != v2 {
				h.t.Fatalf("delete of the current version: %+v", r)
			}
			if r := h.ok(&KVDelete{Key: "k", Version: v2}); r.Deleted != 0 || r.KV.Found {
				h.t.Fatalf("second delete: %+v", r)
			}
		}},
		{"a retried delete is applied once", func(h *harness) {
			v := h.swap(cas("", "k", 0, "v"))
			first := h.ok(withRequest(&KVDelete{Key: "k"}, 1, 1))
			// Another writer creates the key again before the retry.
			v2 := h.swap(cas("", "k", 0, "again"))
			before := h.f.SnapshotBytes()
			retry := h.ok(withRequest(&KVDelete{Key: "k"}, 1, 1))
			if !retry.Duplicate || retry.Deleted != 1 || retry.KV.Version != v || retry.Clock != first.Clock {
				h.t.Fatalf("retry %+v, want the first outcome %+v", retry, first)
			}
			if !bytes.Equal(before, h.f.SnapshotBytes()) || h.f.KV("", "k").Version != v2 {
				h.t.Fatal("the retried delete deleted the key created again")
			}
		}},
		{"bad keys change nothing", func(h *harness) {
			h.swap(cas("", "k", 0, "v"))
			for _, key := range []string{"", "a b", strings.Repeat("k", MaxKVKeyLen+1), "\x7f"} {
				if r := h.rejects(&KVDelete{Key: key}); !strings.Contains(r.Message, "printable ASCII") {
					h.t.Fatalf("key %q: %q", key, r.Message)
				}
			}
		}},
	})
}

func TestKVDeletePrefix(t *testing.T) {
	runKVScenarios(t, []scenario{
		{"every key under the prefix, and no other", func(h *harness) {
			for _, key := range []string{"run/1/a", "run/1/b", "run/10/a", "run/2/a", "run/1", "other"} {
				h.swap(cas("j", key, 0, key))
			}
			r := h.ok(in("j", &KVDeletePrefix{Prefix: "run/1/"}))
			if r.Deleted != 2 || r.Ignored {
				h.t.Fatalf("prefix delete: %+v", r)
			}
			for key, found := range map[string]bool{"run/1/a": false, "run/1/b": false, "run/10/a": true, "run/2/a": true, "run/1": true, "other": true} {
				if got := h.f.KV("j", key); got.Found != found {
					h.t.Fatalf("key %s: found %v, want %v", key, got.Found, found)
				}
			}
			if n := h.f.KVCount("j", ""); n != 4 {
				h.t.Fatalf("%d keys left, want 4", n)
			}
			checkEstimate(h.t, h.f)
			if r := h.ok(in("j", &KVDeletePrefix{Prefix: "run/1/"})); r.Deleted != 0 || !r.Ignored {
				h.t.Fatalf("a prefix with no key: %+v", r)
			}
			if r := h.ok(in("j", &KVDeletePrefix{Prefix: "run/"})); r.Deleted != 3 {
				h.t.Fatalf("run/: %+v", r)
			}
			if n := h.f.KVCount("j", ""); n != 1 {
				h.t.Fatalf("%d keys left, want 1", n)
			}
		}},
		{"a full register goes in one entry", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{MaxJobKVKeys: MaxJobKVKeysCeiling}})
			pairs := make([]KVPair, MaxJobKVKeysCeiling)
			for i := range pairs {
				pairs[i] = KVPair{Key: fmt.Sprintf("p/%05d", i), Value: []byte{byte(i)}}
			}
			h.ok(&KVMultiSet{Pairs: pairs})
			if r := h.ok(&KVDeletePrefix{Prefix: "p/"}); r.Deleted != MaxJobKVKeysCeiling {
				h.t.Fatalf("deleted %d of %d", r.Deleted, MaxJobKVKeysCeiling)
			}
			if ji, _ := h.f.Job(""); ji.KVKeys != 0 || ji.Bytes != emptyJobBytes(DefaultJob) {
				h.t.Fatalf("after the delete: %+v", ji)
			}
		}},
		{"a retry answers the first count and deletes nothing more", func(h *harness) {
			h.swap(cas("", "p/a", 0, "1"))
			h.swap(cas("", "p/b", 0, "1"))
			if r := h.ok(withRequest(&KVDeletePrefix{Prefix: "p/"}, 1, 1)); r.Deleted != 2 {
				h.t.Fatalf("first: %+v", r)
			}
			h.swap(cas("", "p/c", 0, "new"))
			retry := h.ok(withRequest(&KVDeletePrefix{Prefix: "p/"}, 1, 1))
			if !retry.Duplicate || retry.Deleted != 2 || !h.f.KV("", "p/c").Found {
				h.t.Fatalf("retry %+v deleted again", retry)
			}
		}},
		{"bad prefixes change nothing", func(h *harness) {
			h.swap(cas("", "k", 0, "v"))
			for _, p := range []string{"", "a b", strings.Repeat("p", MaxKVKeyLen+1), "caf\xc3\xa9"} {
				if r := h.rejects(&KVDeletePrefix{Prefix: p}); !strings.Contains(r.Message, "a prefix is 1 to 256 bytes") {
					h.t.Fatalf("prefix %q: %q", p, r.Message)
				}
			}
		}},
	})
}

func TestKVAdd(t *testing.T) {
	runKVScenarios(t, []scenario{
		{"add counts from 0 in decimal", func(h *harness) {
			r := h.ok(in("j", &KVAdd{Key: "n", Delta: 2}))
			if r.Sum != 2 || r.KV == nil || string(r.KV.Value) != "2" || r.KV.Version == 0 {
				h.t.Fatalf("first add: %+v", r)
			}
			if _, ok := h.f.Job("j"); !ok {
				h.t.Fatal("the add did not create its job")
			}
			r2 := h.ok(in("j", &KVAdd{Key: "n", Delta: -5}))
			if r2.Sum != -3 || string(h.f.KV("j", "n").Value) != "-3" || r2.KV.Version <= r.KV.Version {
				h.t.Fatalf("second add: %+v", r2)
			}
			// A value written otherwise counts if it is a decimal integer.
			v := h.swap(cas("j", "m", 0, "+40"))
			if r := h.ok(in("j", &KVAdd{Key: "m", Delta: 2})); r.Sum != 42 || r.KV.Version <= v {
				h.t.Fatalf("add to +40: %+v", r)
			}
			if r := h.ok(in("j", &KVAdd{Key: "m"})); r.Sum != 42 {
				h.t.Fatalf("add of 0: %+v", r)
			}
			checkEstimate(h.t, h.f)
		}},
		{"not an integer, or past 64 bits, changes nothing", func(h *harness) {
			for i, v := range []string{"", "x", "1.5", " 1", "0x10", "99999999999999999999"} {
				key := fmt.Sprint("k", i)
				h.swap(cas("", key, 0, v))
				h.unchanged(&KVAdd{Key: key, Delta: 1}, CodeInvalid, "not a decimal integer")
			}
			h.ok(&KVAdd{Key: "big", Delta: math.MaxInt64})
			h.unchanged(&KVAdd{Key: "big", Delta: 1}, CodeInvalid, "overflows 64 bits")
			h.ok(&KVAdd{Key: "small", Delta: math.MinInt64})
			h.unchanged(&KVAdd{Key: "small", Delta: -1}, CodeInvalid, "overflows 64 bits")
			if r := h.ok(&KVAdd{Key: "big", Delta: math.MinInt64}); r.Sum != -1 {
				h.t.Fatalf("max plus min: %+v", r)
			}
		}},
		{"limits", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{MaxJobKVKeys: 1, MaxKVValueBytes: 2}})
			h.ok(&KVAdd{Key: "n", Delta: 99})
			h.wantLimit(&KVAdd{Key: "n", Delta: 1}, "limit max_kv_value_bytes (2) exceeded")
			h.wantLimit(&KVAdd{Key: "m", Delta: 1}, "limit max_job_kv_keys (1) exceeded")
		}},
		{"a retry answers its own sum", func(h *harness) {
			first := h.ok(withRequest(&KVAdd{Key: "n", Delta: 1}, 1, 1))
			h.ok(&KVAdd{Key: "n", Delta: 10})
			before := h.f.SnapshotBytes()
			retry := h.ok(withRequest(&KVAdd{Key: "n", Delta: 1}, 1, 1))
			if !retry.Duplicate || retry.Sum != 1 || string(retry.KV.Value) != "1" || retry.KV.Version != first.KV.Version {
				h.t.Fatalf("retry %+v (KV %+v), want the first outcome %+v", retry, retry.KV, first)
			}
			if !bytes.Equal(before, h.f.SnapshotBytes()) || string(h.f.KV("", "n").Value) != "11" {
				h.t.Fatal("the retry added again")
			}
			// The sum survives a snapshot: a restored replica replays it.
			g := restored(t, h.f.SnapshotBytes())
			c := withRequest(&KVAdd{Header: Header{Now: h.now}, Key: "n", Delta: 1}, 1, 1)
			if r := g.ApplyEntry(1000, Encode(c)); !r.Duplicate || r.Sum != 1 {
				h.t.Fatalf("restored replica replays %+v", r)
			}
		}},
	})
}

func TestKVMultiSet(t *testing.T) {
	pairs := func(kv ...string) []KVPair {
		var out []KVPair
		for i := 0; i < len(kv); i += 2 {
			out = append(out, KVPair{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return out
	}
	runKVScenarios(t, []scenario{
		{"every key in one entry, versions in order", func(h *harness) {
			v := h.swap(cas("j", "b", 0, "old"))
			r := h.ok(in("j", &KVMultiSet{Pairs: pairs("a", "1", "b", "2", "c", "")}))
			if len(r.Versions) != 3 || r.Versions[0] <= v || r.Versions[1] != r.Versions[0]+1 || r.Versions[2] != r.Versions[0]+2 {
				h.t.Fatalf("versions %v after %d", r.Versions, v)
			}
			for i, key := range []string{"a", "b", "c"} {
				if got := h.f.KV("j", key); !got.Found || got.Version != r.Versions[i] || string(got.Value) != []string{"1", "2", ""}[i] {
					h.t.Fatalf("key %s: %+v", key, got)
				}
			}
			checkEstimate(h.t, h.f)
		}},
		{"all or nothing at the limits", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{MaxJobKVKeys: 3, MaxKVValueBytes: 4}})
			h.swap(cas("", "a", 0, "x"))
			h.swap(cas("", "b", 0, "x"))
			h.wantLimit(&KVMultiSet{Pairs: pairs("a", "1", "c", "1", "d", "1")}, "limit max_job_kv_keys (3) exceeded")
			h.wantLimit(&KVMultiSet{Pairs: pairs("a", "123", "b", "45")}, "limit max_kv_value_bytes (4) exceeded")
			// Replacing keys adds none.
			h.ok(&KVMultiSet{Pairs: pairs("a", "12", "b", "34", "c", "")})
		}},
		{"bad multi-sets change nothing", func(h *harness) {
			h.rejects(&KVMultiSet{})
			h.rejects(&KVMultiSet{Pairs: pairs("a", "1", "a", "2")})
			h.rejects(&KVMultiSet{Pairs: pairs("a", "1", "b c", "2")})
			big := []KVPair{{Key: "a", Value: make([]byte, MaxKVValueBytesCeiling/2+1)}, {Key: "b", Value: make([]byte, MaxKVValueBytesCeiling/2)}}
			h.rejects(&KVMultiSet{Pairs: big})
		}},
		{"a retry answers the versions it gave", func(h *harness) {
			first := h.ok(withRequest(&KVMultiSet{Pairs: pairs("a", "1", "b", "2")}, 1, 1))
			h.ok(&KVMultiSet{Pairs: pairs("a", "3")})
			retry := h.ok(withRequest(&KVMultiSet{Pairs: pairs("a", "1", "b", "2")}, 1, 1))
			if !retry.Duplicate || !slices.Equal(retry.Versions, first.Versions) || string(h.f.KV("", "a").Value) != "3" {
				h.t.Fatalf("retry %+v, first %+v", retry, first)
			}
		}},
	})
}

func TestKVAppend(t *testing.T) {
	runKVScenarios(t, []scenario{
		{"append creates and extends", func(h *harness) {
			r := h.ok(in("j", &KVAppend{Key: "log", Value: []byte("ab")}))
			if r.Length != 2 || r.KV == nil || r.KV.Version == 0 || r.KV.Value != nil {
				h.t.Fatalf("first append: %+v", r)
			}
			r2 := h.ok(in("j", &KVAppend{Key: "log", Value: []byte("cd")}))
			if r2.Length != 4 || r2.KV.Version <= r.KV.Version || string(h.f.KV("j", "log").Value) != "abcd" {
				h.t.Fatalf("second append: %+v, key %+v", r2, h.f.KV("j", "log"))
			}
			checkEstimate(h.t, h.f)
		}},
		{"the value stays within its limit", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{MaxKVValueBytes: 4, MaxJobKVKeys: 1}})
			h.ok(&KVAppend{Key: "log", Value: []byte("abc")})
			h.wantLimit(&KVAppend{Key: "log", Value: []byte("de")}, "limit max_kv_value_bytes (4) exceeded: appending 2 bytes to the 3")
			h.wantLimit(&KVAppend{Key: "new", Value: []byte("x")}, "limit max_job_kv_keys (1) exceeded")
			h.ok(&KVAppend{Key: "log", Value: []byte("d")})
		}},
		{"a retry appends once", func(h *harness) {
			first := h.ok(withRequest(&KVAppend{Key: "log", Value: []byte("a")}, 1, 1))
			h.ok(&KVAppend{Key: "log", Value: []byte("b")})
			retry := h.ok(withRequest(&KVAppend{Key: "log", Value: []byte("a")}, 1, 1))
			if !retry.Duplicate || retry.Length != 1 || retry.KV.Version != first.KV.Version || string(h.f.KV("", "log").Value) != "ab" {
				h.t.Fatalf("retry %+v, key %+v", retry, h.f.KV("", "log"))
			}
		}},
		{"bad appends change nothing", func(h *harness) {
			h.rejects(&KVAppend{Key: "a b", Value: []byte("x")})
			h.rejects(&KVAppend{Key: "k", Value: make([]byte, MaxKVValueBytesCeiling+1)})
		}},
	})
}

func TestKVCompareValue(t *testing.T) {
	cv := func(key, expected, desired string) *KVCompareValue {
		return &KVCompareValue{Key: key, Expected: []byte(expected), Desired: []byte(desired)}
	}
	runKVScenarios(t, []scenario{
		{"c10d's compare_set", func(h *harness) {
			// Absent, expecting a value: nothing set, and no job created.
			if r := h.ok(in("j", cv("k", "x", "y"))); r.Swapped || !r.Ignored || r.KV.Found {
				h.t.Fatalf("absent key expecting a value: %+v", r)
			}
			if _, ok := h.f.Job("j"); ok {
				h.t.Fatal("a compare that did not swap created its job")
			}
			// Absent, expecting nothing: set.
			r := h.ok(in("j", cv("k", "", "first")))
			if !r.Swapped || string(r.KV.Value) != "first" || r.KV.Version == 0 {
				h.t.Fatalf("absent key expecting nothing: %+v", r)
			}
			// Present: set only when it holds the expected value.
			if r := h.ok(in("j", cv("k", "other", "second"))); r.Swapped || string(r.KV.Value) != "first" {
				h.t.Fatalf("wrong expected value: %+v", r)
			}
			if r := h.ok(in("j", cv("k", "", "second"))); r.Swapped {
				h.t.Fatalf("present key, expecting nothing: %+v", r)
			}
			if r := h.ok(in("j", cv("k", "first", "second"))); !r.Swapped || string(h.f.KV("j", "k").Value) != "second" {
				h.t.Fatalf("right expected value: %+v", r)
			}
			// An empty value is matched by an empty expected value.
			h.ok(in("j", cv("k", "second", "")))
			if r := h.ok(in("j", cv("k", "", "third"))); !r.Swapped {
				h.t.Fatalf("empty value, expecting empty: %+v", r)
			}
		}},
		{"limits", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{MaxJobs: 1, MaxKVValueBytes: 3}})
			h.ok(in("a", cv("k", "", "v")))
			// A desired value over the limit is refused whatever the key holds.
			h.wantLimit(in("a", cv("k", "nope", "long")), "limit max_kv_value_bytes (3) exceeded")
			// At max_jobs, one that cannot set answers; one that would set
			// a new job is refused.
			if r := h.ok(in("b", cv("k", "x", "y"))); r.Swapped || r.KV.Found {
				h.t.Fatalf("at max_jobs: %+v", r)
			}
			h.wantLimit(in("b", cv("k", "", "y")), "limit max_jobs (1) exceeded")
		}},
		{"retries", func(h *harness) {
			first := h.ok(withRequest(cv("k", "", "mine"), 1, 1))
			h.ok(cv("k", "mine", "theirs"))
			if r := h.ok(withRequest(cv("k", "", "mine"), 1, 1)); !r.Duplicate || !r.Swapped || string(r.KV.Value) != "mine" || r.KV.Version != first.KV.Version {
				h.t.Fatalf("retried swap: %+v", r)
			}
			// A miss answers the key as it is at the retry...
			if r := h.ok(withRequest(cv("k", "other", "x"), 1, 2)); r.Swapped {
				h.t.Fatalf("miss: %+v", r)
			}
			h.ok(cv("k", "theirs", "later"))
			if r := h.ok(withRequest(cv("k", "other", "x"), 1, 2)); !r.Duplicate || r.Swapped || string(r.KV.Value) != "later" {
				h.t.Fatalf("retried miss: %+v", r)
			}
			// ...unless the key now holds what it expected.
			h.ok(cv("k", "later", "other"))
			before := h.f.SnapshotBytes()
			if r := h.rejects(withRequest(cv("k", "other", "x"), 1, 2)); !strings.Contains(r.Message, "new request id") {
				h.t.Fatalf("message %q", r.Message)
			}
			if !bytes.Equal(before, h.f.SnapshotBytes()) {
				h.t.Fatal("the refused retry wrote")
			}
		}},
	})
}

// TestKVReads: KVMulti reads keys at one point, KVCount counts a prefix.
func TestKVReads(t *testing.T) {
	runKVScenarios(t, []scenario{
		{"multi and count", func(h *harness) {
			v := h.swap(cas("j", "a/1", 0, "x"))
			h.swap(cas("j", "a/2", 0, "y"))
			h.swap(cas("j", "b", 0, "z"))
			got := h.f.KVMulti("j", []string{"a/1", "absent", "b"})
			if len(got) != 3 || got[0].Version != v || string(got[0].Value) != "x" || got[1].Found || string(got[2].Value) != "z" {
				h.t.Fatalf("KVMulti %+v", got)
			}
			if got := h.f.KVMulti("none", []string{"a"}); len(got) != 1 || got[0].Found {
				h.t.Fatalf("KVMulti of a job that does not exist: %+v", got)
			}
			for prefix, want := range map[string]int{"": 3, "a/": 2, "a/1": 1, "c": 0} {
				if n := h.f.KVCount("j", prefix); n != want {
					h.t.Fatalf("KVCount(%q) = %d, want %d", prefix, n, want)
				}
			}
			if n := h.f.KVCount("none", ""); n != 0 {
				h.t.Fatalf("KVCount of a job that does not exist: %d", n)
			}
		}},
	})
}

// TestKVWritesNeedProtocol5: below Protocol5 the leader does not propose
// the register's new writes (ErrUpgradePending), and every replica
// refuses them alike, changing nothing.
func TestKVWritesNeedProtocol5(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol4})
	h.swap(cas("", "k", 0, "1"))
	for _, c := range []Command{
		&KVDelete{Key: "k"}, &KVDeletePrefix{Prefix: "k"}, &KVAdd{Key: "k", Delta: 1},
		&KVMultiSet{Pairs: []KVPair{{Key: "k", Value: []byte("2")}}}, &KVAppend{Key: "k", Value: []byte("2")},
		&KVCompareValue{Key: "k", Expected: []byte("1"), Desired: []byte("2")},
	} {
		if err := h.f.Allows(c); !errors.Is(err, ErrUpgradePending) {
			t.Errorf("%v at level 4: Allows says %v", c.Type(), err)
		}
		if r := h.rejects(c); !strings.Contains(r.Message, "needs protocol level 5") {
			t.Errorf("%v at level 4: %q", c.Type(), r.Message)
		}
	}
	h.ok(&SetProtocol{Level: Protocol5})
	if r := h.ok(&KVAdd{Key: "k", Delta: 1}); r.Sum != 2 {
		t.Fatalf("at level 5: %+v", r)
	}
}

// TestSnapshotVersion8: from Protocol5 the snapshot is version 8, whose
// de-duplication entries keep the numbers of the register's writes, and a
// version 8 snapshot of a state below Protocol5 is refused.
func TestSnapshotVersion8(t *testing.T) {
	f := applyLog(setupLogAt(Protocol4))
	if v := snapshotVersionOf(t, f); v != 7 {
		t.Fatalf("a Protocol4 state writes version %d", v)
	}
	f = applyLog(setupLogAt(Protocol5))
	if v := snapshotVersionOf(t, f); v != 8 {
		t.Fatalf("a Protocol5 state writes version %d", v)
	}
	g := restored(t, f.SnapshotBytes())
	if g.StateHash() != f.StateHash() {
		t.Fatal("version 8 does not round-trip")
	}
	// The retried add answers the sum the first made, from the snapshot.
	retry := &KVAdd{Header: Header{Now: t0, Request: RequestID{Client: clientID(4), Seq: 1}}, Key: "count", Delta: 41}
	if r := g.ApplyEntry(1000, Encode(retry)); !r.Duplicate || r.Sum != 41 {
		t.Fatalf("replayed after a restore: %+v", r)
	}
	s := applyLog(setupLogAt(Protocol5)).s
	s.protocol = Protocol4
	var buf bytes.Buffer
	if err := encodeStateVersion(&buf, s, 8); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, buf.Bytes())
}

// TestKVCompareAndSetLostIsTheLogsAnswer checks the promise that lets the
// leader answer a stale compare-and-set without a log entry: whenever
// KVCompareAndSetLost says a compare-and-set is lost, every application of
// it, earlier attempts of its request still in the log included, answers
// not swapped, and the first of them with the value it named. Requests are
// proposed, retried and applied in random orders among deletes of the keys.
func TestKVCompareAndSetLostIsTheLogsAnswer(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := New()
		var index uint64
		now := t0
		apply := func(c Command) *Result {
			index++
			now += int64(time.Millisecond)
			c.Hdr().Now = now
			return f.ApplyEntry(index, Encode(c))
		}
		type request struct {
			c       *KVCompareAndSet
			applied bool
			lost    bool // KVCompareAndSetLost said so while it was pending
		}
		var requests []*request
		var pending []*request // proposed, not yet applied, in log order
		seqs := map[byte]uint64{}
		keys := []string{"a", "b"}
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 4).Draw(rt, "op") {
			case 0: // a new compare-and-set, proposed
				key := rapid.SampledFrom(keys).Draw(rt, "key")
				version := f.KV(DefaultJob, key).Version
				if rapid.Bool().Draw(rt, "stale") {
					version = uint64(rapid.IntRange(0, int(max(index, 1))).Draw(rt, "version"))
				}
				client := byte(rapid.IntRange(1, 3).Draw(rt, "client"))
				seqs[client]++
				c := withRequest(cas("", key, version, "v"), client, seqs[client]).(*KVCompareAndSet)
				r := &request{c: c}
				requests = append(requests, r)
				pending = append(pending, r)
			case 1: // the log applies its next entry
				if len(pending) == 0 {
					continue
				}
				r := pending[0]
				pending = pending[1:]
				res := apply(r.c)
				if r.lost && res.Swapped {
					rt.Fatalf("%+v was said lost, then swapped", r.c)
				}
				r.applied = true
			case 2: // a retry reaches the leader, which asks whether it is lost
				if len(requests) == 0 {
					continue
				}
				r := rapid.SampledFrom(requests).Draw(rt, "retry")
				c := *r.c
				v, lost := f.KVCompareAndSetLost(&c)
				if !lost {
					continue
				}
				if r.applied {
					rt.Fatalf("%+v, already applied, was said lost: its retry must be answered by the log", r.c)
				}
				if now := f.KV(DefaultJob, c.Key); !reflect.DeepEqual(v, now) {
					rt.Fatalf("said lost with %+v, the key holds %+v", v, now)
				}
				r.lost = true
			case 3: // another client deletes a key
				key := rapid.SampledFrom(keys).Draw(rt, "delete")
				apply(in("", &KVDelete{Key: key}))
			case 4: // a client re-sends a pending request: a second entry of it
				if len(pending) == 0 {
					continue
				}
				pending = append(pending, rapid.SampledFrom(pending).Draw(rt, "again"))
			}
		}
		for _, r := range pending {
			if res := apply(r.c); r.lost && res.Swapped {
				rt.Fatalf("%+v was said lost, then swapped", r.c)
			}
		}
	})
}
