package fsm

import "fmt"

// A job's register: keys that hold a value and a version, changed only by
// KVCompareAndSet, as a rendezvous backend (torchrun's) needs.

// kvEntry is one key of a job's register.
type kvEntry struct {
	// value is never modified: a write replaces it, so readers and
	// snapshots may share it.
	value []byte
	// version is the number the write that stored value was given
	// (state.kvVersion), unique in the cluster for ever.
	version uint64
}

// KVValue is what a job's register holds under a key.
type KVValue struct {
	// Found reports that the key exists.
	Found bool
	// Value is the key's value, shared with the state: read it, never
	// modify it.
	Value []byte
	// Version is the key's version, 0 when it does not exist.
	Version uint64
}

// kvValue returns what key holds in the job's register.
func (j *job) kvValue(key string) KVValue {
	e, ok := j.kv[key]
	return KVValue{Found: ok, Value: e.value, Version: e.version}
}

// kvBytes is the size estimate of one key of a register (limits.go).
func kvBytes(key string, value []byte) int64 { return estKVKey + int64(len(key)) + int64(len(value)) }

// ValidateKVKey checks a register key: 1 to MaxKVKeyLen bytes of
// printable ASCII other than space ('!' to '~'). The rule is ASCII, not
// Unicode's printable class, whose tables change with Go's version and
// so could make replicas of different builds disagree. The error wraps
// ErrInvalid and states the rule.
func ValidateKVKey(key string) error {
	const rule = "a key is 1 to 256 bytes of printable ASCII without spaces ('!' to '~')"
	if key == "" || len(key) > MaxKVKeyLen {
		return invalidf("key of %d bytes: %s", len(key), rule)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < '!' || c > '~' {
			return invalidf("key %q: byte %d is 0x%02x; %s", key, i, c, rule)
		}
	}
	return nil
}

// kvCompareAndSet stores the value when the key's version is the one the
// command expects (0: the key must not exist) under a new version, and
// otherwise answers the key as it is, changing nothing (Ignored). A value
// over Limits.MaxKVValueBytes is refused whatever the versions; a new key past
// Limits.MaxJobKVKeys, or a write past MaxStateBytes, only when it would
// be stored.
func (j *job) kvCompareAndSet(c *KVCompareAndSet) *Result {
	l := j.cluster.effectiveLimits()
	if n := int64(len(c.Value)); n > l.MaxKVValueBytes {
		return errResult(limitf("max_kv_value_bytes", l.MaxKVValueBytes, "a value of %d bytes for key %q", n, c.Key))
	}
	cur, found := j.kv[c.Key]
	if cur.version != c.Version {
		v := j.kvValue(c.Key)
		return &Result{Ignored: true, KV: &v}
	}
	delta := kvBytes(c.Key, c.Value)
	if found {
		delta -= kvBytes(c.Key, cur.value)
	} else if len(j.kv) >= l.MaxJobKVKeys {
		return errResult(limitf("max_job_kv_keys", int64(l.MaxJobKVKeys), "key %q would make %d keys in job %q", c.Key, len(j.kv)+1, j.name))
	}
	if err := j.room(delta); err != nil {
		return errResult(err)
	}
	j.cluster.kvVersion++
	j.kv[c.Key] = kvEntry{value: c.Value, version: j.cluster.kvVersion}
	j.account(delta)
	v := j.kvValue(c.Key)
	return &Result{Swapped: true, KV: &v}
}

// replayKV answers a retry of KVCompareAndSet c from its first outcome e.
// A swap is replayed as it was: the version it stored, with the value
// the key holds while it is still at that version, else the value the
// retry carries, which is the request's. A compare-and-set that did not
// swap changed nothing, so it is answered with the key as it is now, a
// read at the retry's place in the log, which lies within the client's
// call; but when the key now holds the version the command expected (its
// job was deleted since, or the version it named was not yet given out),
// such an answer would contradict the outcome, and the retry is refused
// instead.
func (s *state) replayKV(c *KVCompareAndSet, e *dedupEntry, r *Result) *Result {
	r.Granted, r.Generation = false, 0 // the entry's fields hold the swap and the version
	var cur KVValue
	if j := s.jobs[jobName(c.Job)]; j != nil {
		cur = j.kvValue(c.Key)
	}
	switch {
	case e.granted && cur.Version == e.gen:
		r.Swapped, r.KV = true, &cur
	case e.granted:
		r.Swapped, r.KV = true, &KVValue{Found: true, Value: c.Value, Version: e.gen}
	case cur.Version == c.Version:
		return errResult(invalidf("request id %s/%d: the compare-and-set of key %q did not swap (the key was at version %d), "+
			"and the key is now at the version %d it expected; send it again with a new request id",
			c.Request.Client, c.Request.Seq, c.Key, e.gen, c.Version))
	default:
		r.KV = &cur
	}
	return r
}

// KV returns what key holds in the register of job ("" is DefaultJob):
// not found when the key, or the job, does not exist.
func (f *FSM) KV(job, key string) KVValue {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if j := f.s.jobs[jobName(job)]; j != nil {
		return j.kvValue(key)
	}
	return KVValue{}
}

// checkKV verifies a job's register against the limits and the version
// counter; seen collects the versions of every job, which are unique.
func (j *job) checkKV(seen map[uint64]bool) error {
	if len(j.kv) > MaxJobKVKeysCeiling {
		return fmt.Errorf("%d keys exceed %d", len(j.kv), MaxJobKVKeysCeiling)
	}
	for _, key := range sortedKeys(j.kv) {
		e := j.kv[key]
		if err := ValidateKVKey(key); err != nil {
			return err
		}
		if len(e.value) > MaxKVValueBytesCeiling || e.version == 0 || e.version > j.cluster.kvVersion || seen[e.version] {
			return fmt.Errorf("key %q: %d bytes at version %d of %d, or a version twice", key, len(e.value), e.version, j.cluster.kvVersion)
		}
		seen[e.version] = true
	}
	return nil
}
