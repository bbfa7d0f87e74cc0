package fsm

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
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
