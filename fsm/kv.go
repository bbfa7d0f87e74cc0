package fsm

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// A job's register: keys that hold a value and a version, as a rendezvous
// backend (torchrun's) and its c10d store need. KVCompareAndSet is the
// backend's compare-and-set by version; from Protocol5 KVDelete,
// KVDeletePrefix, KVAdd, KVMultiSet, KVAppend and KVCompareValue are the
// store's writes, one entry each.

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
func ValidateKVKey(key string) error { return validateKVName("key", key) }

// ValidateKVPrefix checks a prefix of register keys (KVDeletePrefix,
// FSM.KVCount) with the rule of a key: a prefix that no key could start
// with is refused rather than matched by nothing.
func ValidateKVPrefix(prefix string) error { return validateKVName("prefix", prefix) }

// validateKVName checks a key or a prefix (what) against the rule of keys.
func validateKVName(what, s string) error {
	rule := fmt.Sprintf("a %s is 1 to %d bytes of printable ASCII without spaces ('!' to '~')", what, MaxKVKeyLen)
	if s == "" || len(s) > MaxKVKeyLen {
		return invalidf("%s of %d bytes: %s", what, len(s), rule)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < '!' || c > '~' {
			return invalidf("%s %q: byte %d is 0x%02x; %s", what, s, i, c, rule)
		}
	}
	return nil
}

// checkKVValue refuses a value of n bytes for key over
// Limits.MaxKVValueBytes.
func (j *job) checkKVValue(key string, n int) error {
	if l := j.cluster.effectiveLimits().MaxKVValueBytes; int64(n) > l {
		return limitf("max_kv_value_bytes", l, "a value of %d bytes for key %q", n, key)
	}
	return nil
}

// kvRoom checks that value may be stored under key: a new key within
// Limits.MaxJobKVKeys, and the state within MaxStateBytes. It returns the
// change of the size estimate, for kvStore.
func (j *job) kvRoom(key string, value []byte) (int64, error) {
	delta := kvBytes(key, value)
	if cur, found := j.kv[key]; found {
		delta -= kvBytes(key, cur.value)
	} else if l := j.cluster.effectiveLimits(); len(j.kv) >= l.MaxJobKVKeys {
		return 0, limitf("max_job_kv_keys", int64(l.MaxJobKVKeys), "key %q would make %d keys in job %q", key, len(j.kv)+1, j.name)
	}
	if err := j.room(delta); err != nil {
		return 0, err
	}
	return delta, nil
}

// kvStore stores value under key under the next version, the size
// estimate changing by delta (kvRoom's), and returns the key. value must
// never be modified afterwards.
func (j *job) kvStore(key string, value []byte, delta int64) KVValue {
	j.cluster.kvVersion++
	j.kv[key] = kvEntry{value: value, version: j.cluster.kvVersion}
	j.account(delta)
	j.changedKV(key)
	return j.kvValue(key)
}

// kvRemove deletes key, which holds e.
func (j *job) kvRemove(key string, e kvEntry) {
	delete(j.kv, key)
	j.account(-kvBytes(key, e.value))
	j.changedKV(key)
}

// kvCompareAndSet stores the value when the key's version is the one the
// command expects (0: the key must not exist) under a new version, and
// otherwise answers the key as it is, changing nothing (Ignored). A value
// over Limits.MaxKVValueBytes is refused whatever the versions; a new key past
// Limits.MaxJobKVKeys, or a write past MaxStateBytes, only when it would
// be stored.
func (j *job) kvCompareAndSet(c *KVCompareAndSet) *Result {
	if err := j.checkKVValue(c.Key, len(c.Value)); err != nil {
		return errResult(err)
	}
	if j.kv[c.Key].version != c.Version {
		v := j.kvValue(c.Key)
		return &Result{Ignored: true, KV: &v}
	}
	delta, err := j.kvRoom(c.Key, c.Value)
	if err != nil {
		return errResult(err)
	}
	v := j.kvStore(c.Key, c.Value, delta)
	return &Result{Swapped: true, KV: &v}
}

// kvDelete deletes the key when it exists at the version the command
// names (any, for 0), and answers the key's version when it ran: the
// deleted one, or the one it did not delete (Ignored).
func (j *job) kvDelete(c *KVDelete) *Result {
	cur, found := j.kv[c.Key]
	if !found || c.Version != 0 && cur.version != c.Version {
		return &Result{Ignored: true, KV: &KVValue{Found: found, Version: cur.version}}
	}
	j.kvRemove(c.Key, cur)
	return &Result{Deleted: 1, KV: &KVValue{Found: true, Version: cur.version}}
}

// kvDeletePrefix deletes every key under the prefix and answers how many;
// none is Ignored. The register holds at most MaxJobKVKeysCeiling keys,
// which bounds the entry's work.
func (j *job) kvDeletePrefix(c *KVDeletePrefix) *Result {
	n := 0
	for _, key := range sortedKeys(j.kv) {
		if strings.HasPrefix(key, c.Prefix) {
			j.kvRemove(key, j.kv[key])
			n++
		}
	}
	if n == 0 {
		return &Result{Ignored: true}
	}
	return &Result{Deleted: n}
}

// kvAdd adds the delta to the decimal integer the key holds (0 when it
// does not exist) and stores the sum, in decimal, under a new version.
// A value that is not a decimal integer (strconv.ParseInt's, base 10) and
// a sum past 64 bits are refused, changing nothing.
func (j *job) kvAdd(c *KVAdd) *Result {
	cur, found := j.kv[c.Key]
	var base int64
	if found {
		v, err := strconv.ParseInt(string(cur.value), 10, 64)
		if err != nil {
			return errResult(invalidf("key %q holds %s, which is not a decimal integer of 64 bits", c.Key, quoteValue(cur.value)))
		}
		base = v
	}
	sum := base + c.Delta
	if c.Delta > 0 && sum < base || c.Delta < 0 && sum > base {
		return errResult(invalidf("key %q: %d plus %d overflows 64 bits", c.Key, base, c.Delta))
	}
	value := strconv.AppendInt(nil, sum, 10)
	if err := j.checkKVValue(c.Key, len(value)); err != nil {
		return errResult(err)
	}
	delta, err := j.kvRoom(c.Key, value)
	if err != nil {
		return errResult(err)
	}
	v := j.kvStore(c.Key, value, delta)
	return &Result{Sum: sum, KV: &v}
}

// quoteValue quotes a value for a message, cut to 32 bytes.
func quoteValue(v []byte) string {
	if len(v) > 32 {
		return strconv.Quote(string(v[:32])) + "..."
	}
	return strconv.Quote(string(v))
}

// kvMultiSet stores every pair, each under a new version in order, or
// none: the values together within Limits.MaxKVValueBytes, so that the
// entry is no larger than a compare-and-set's, the new keys within
// Limits.MaxJobKVKeys and the state within MaxStateBytes.
func (j *job) kvMultiSet(c *KVMultiSet) *Result {
	l := j.cluster.effectiveLimits()
	total, added := 0, 0
	var delta int64
	for _, p := range c.Pairs {
		total += len(p.Value)
		delta += kvBytes(p.Key, p.Value)
		if cur, found := j.kv[p.Key]; found {
			delta -= kvBytes(p.Key, cur.value)
		} else {
			added++
		}
	}
	if int64(total) > l.MaxKVValueBytes {
		return errResult(limitf("max_kv_value_bytes", l.MaxKVValueBytes, "values of %d bytes together for %d keys", total, len(c.Pairs)))
	}
	if added > 0 && len(j.kv)+added > l.MaxJobKVKeys {
		return errResult(limitf("max_job_kv_keys", int64(l.MaxJobKVKeys), "%d new keys would make %d keys in job %q", added, len(j.kv)+added, j.name))
	}
	if err := j.room(delta); err != nil {
		return errResult(err)
	}
	versions := make([]uint64, len(c.Pairs))
	for i, p := range c.Pairs {
		j.cluster.kvVersion++
		j.kv[p.Key] = kvEntry{value: p.Value, version: j.cluster.kvVersion}
		versions[i] = j.cluster.kvVersion
		j.changedKV(p.Key)
	}
	j.account(delta)
	return &Result{Versions: versions}
}

// kvAppend appends the bytes to the key's value, creating the key, under
// a new version, and answers the value's new length. The bytes appended,
// and the value they make, are each within Limits.MaxKVValueBytes.
func (j *job) kvAppend(c *KVAppend) *Result {
	if err := j.checkKVValue(c.Key, len(c.Value)); err != nil {
		return errResult(err)
	}
	cur := j.kv[c.Key]
	n := len(cur.value) + len(c.Value)
	if l := j.cluster.effectiveLimits().MaxKVValueBytes; int64(n) > l {
		return errResult(limitf("max_kv_value_bytes", l, "appending %d bytes to the %d of key %q", len(c.Value), len(cur.value), c.Key))
	}
	value := append(append(make([]byte, 0, n), cur.value...), c.Value...) // values are never modified: a new one
	delta, err := j.kvRoom(c.Key, value)
	if err != nil {
		return errResult(err)
	}
	v := j.kvStore(c.Key, value, delta)
	return &Result{Length: n, KV: &KVValue{Found: true, Version: v.Version}}
}

// kvCompareValue stores the desired value when the key holds the
// expected one, or does not exist and the expected value is empty (c10d's
// compareSet), and answers the key afterwards; otherwise it changes
// nothing (Ignored). A desired value over Limits.MaxKVValueBytes is refused
// whatever the key holds, as a compare-and-set's.
func (j *job) kvCompareValue(c *KVCompareValue) *Result {
	if err := j.checkKVValue(c.Key, len(c.Desired)); err != nil {
		return errResult(err)
	}
	if cur, found := j.kv[c.Key]; !kvMatches(found, cur.value, c.Expected) {
		v := j.kvValue(c.Key)
		return &Result{Ignored: true, KV: &v}
	}
	delta, err := j.kvRoom(c.Key, c.Desired)
	if err != nil {
		return errResult(err)
	}
	v := j.kvStore(c.Key, c.Desired, delta)
	return &Result{Swapped: true, KV: &v}
}

// kvMatches reports whether a key (found, holding value) is as a
// KVCompareValue expecting expected requires: holding it, or absent when
// it is empty.
func kvMatches(found bool, value, expected []byte) bool {
	if !found {
		return len(expected) == 0
	}
	return bytes.Equal(value, expected)
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

// replayCompareValue answers a retry of KVCompareValue c from its first
// outcome e as replayKV answers a KVCompareAndSet: a swap as it was, a
// miss with the key as it is now, unless the key now holds what the
// command expected, which would contradict the miss: that retry is
// refused.
func (s *state) replayCompareValue(c *KVCompareValue, e *dedupEntry, r *Result) *Result {
	r.Granted, r.Generation = false, 0
	var cur KVValue
	if j := s.jobs[jobName(c.Job)]; j != nil {
		cur = j.kvValue(c.Key)
	}
	switch {
	case e.granted && cur.Version == e.gen:
		r.Swapped, r.KV = true, &cur
	case e.granted:
		r.Swapped, r.KV = true, &KVValue{Found: true, Value: c.Desired, Version: e.gen}
	case kvMatches(cur.Found, cur.Value, c.Expected):
		return errResult(invalidf("request id %s/%d: the compare-and-set of key %q did not swap, "+
			"and the key now holds the value it expected; send it again with a new request id",
			c.Request.Client, c.Request.Seq, c.Key))
	default:
		r.KV = &cur
	}
	return r
}

// replayKVWrite answers a retry of KVDelete, KVDeletePrefix, KVAdd,
// KVMultiSet or KVAppend with its first outcome, which the entry holds
// whole (e.gen, the version; e.num, the number the answer carries) and
// which time does not change: a retried add answers the sum it made, not
// the key's value at the retry.
func replayKVWrite(c Command, e *dedupEntry, r *Result) *Result {
	r.Granted, r.Generation = false, 0
	switch c := c.(type) {
	case *KVDelete:
		r.Deleted, r.KV = int(e.num), &KVValue{Found: e.gen != 0, Version: e.gen}
	case *KVDeletePrefix:
		r.Deleted = int(e.num)
	case *KVAdd:
		r.Sum, r.KV = e.num, &KVValue{Found: true, Value: strconv.AppendInt(nil, e.num, 10), Version: e.gen}
	case *KVAppend:
		r.Length, r.KV = int(e.num), &KVValue{Found: true, Version: e.gen}
	case *KVMultiSet:
		r.Versions = make([]uint64, len(c.Pairs))
		for i := range r.Versions {
			r.Versions[i] = e.gen + uint64(i)
		}
	}
	return r
}

// kvNumber returns the number a register write's answer carries, which
// its de-duplication entry keeps (dedupEntry.num): KVAdd's sum,
// KVAppend's length, the keys a delete deleted; 0 for other types.
func kvNumber(typ CmdType, r *Result) int64 {
	switch typ {
	case TypeKVAdd:
		return r.Sum
	case TypeKVAppend:
		return int64(r.Length)
	case TypeKVDelete, TypeKVDeletePrefix:
		return int64(r.Deleted)
	case TypeReportProgress, TypeCommitCursor, TypeRestoreCursor:
		return int64(r.Recorded)
	case TypeGetTask:
		return r.Finish.number()
	}
	return 0
}

// kvNumbered reports whether the de-duplication entries of typ keep a
// number (kvNumber), which snapshots of version 8 write: from version 12
// on, GetTask's too (its finish's outcome).
func kvNumbered(typ CmdType, version uint64) bool {
	if typ == TypeGetTask {
		return version >= 12
	}
	switch typ {
	case TypeKVAdd, TypeKVAppend, TypeKVDelete, TypeKVDeletePrefix, TypeReportProgress, TypeCommitCursor, TypeRestoreCursor:
		return true
	}
	return false
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

// KVMulti returns what each key holds in the register of job, in the
// order of keys, read at one point of the log.
func (f *FSM) KVMulti(job string, keys []string) []KVValue {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]KVValue, len(keys))
	if j := f.s.jobs[jobName(job)]; j != nil {
		for i, key := range keys {
			out[i] = j.kvValue(key)
		}
	}
	return out
}

// KVCount returns how many keys of the register of job start with prefix,
// "" counting every key.
func (f *FSM) KVCount(job, prefix string) int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j := f.s.jobs[jobName(job)]
	switch {
	case j == nil:
		return 0
	case prefix == "":
		return len(j.kv)
	}
	n := 0
	for _, key := range sortedKeys(j.kv) {
		if strings.HasPrefix(key, prefix) {
			n++
		}
	}
	return n
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

// KVCompareAndSetLost reports whether the compare-and-set c would be
// answered "not swapped" if it were proposed now, with nothing else
// changing, and returns the key's value when it would. The leader then
// answers c from this replica's state, after a read barrier, and proposes
// nothing: a stale compare-and-set costs no log entry.
//
// That answer is the one the log would give, whenever the entry would be
// applied: c names a version other than 0 that has been given (a version
// not given yet could be the key's next), the key is not at it, and a
// version is never given again, so the key can never be at it again. The
// other conditions make sure that proposing c would reach that comparison
// and that no earlier attempt of c's request can answer otherwise: c is
// valid at the cluster's level, its session (if any) is open and owned by
// its request id's owner, its request id is of a client the
// de-duplication table holds (a client's first request is admitted by the
// log) and has no outcome recorded and is not too old to be
// de-duplicated, and its job exists. Where one of them
// fails, the write goes through the log as any other, and is answered
// there.
func (f *FSM) KVCompareAndSetLost(c *KVCompareAndSet) (KVValue, bool) {
	if c.Version == 0 {
		return KVValue{}, false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.s
	h := c.Hdr()
	if validate(c) != nil || s.checkLevel(c) != nil || s.checkSession(h) != nil || !s.dedup.unseen(h.Request) {
		return KVValue{}, false
	}
	j := s.jobs[jobName(h.Job)]
	if j == nil || j.checkKVValue(c.Key, len(c.Value)) != nil || c.Version > s.kvVersion || j.kv[c.Key].version == c.Version {
		return KVValue{}, false
	}
	return j.kvValue(c.Key), true
}
