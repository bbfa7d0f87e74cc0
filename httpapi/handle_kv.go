package httpapi

import (
	"encoding/base64"
	"net/http"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// handleKVGet reads a key of the job's register. The read is
// linearizable: only the leader answers, after a read barrier, so it sees
// every compare-and-set acknowledged before the request; a follower
// redirects.
func (s *Handler) handleKVGet(w http.ResponseWriter, r *http.Request) error {
	key := r.URL.Query().Get(rpc.KVParamKey)
	if err := checkKVKey(key); err != nil {
		return err
	}
	if err := s.b.ReadBarrier(r.Context()); err != nil {
		return readError(err)
	}
	v := s.b.FSM().KV(jobOf(r), key)
	writeJSON(w, http.StatusOK, rpc.KVGetResponse{Key: key, Found: v.Found, Value: v.Value, Version: v.Version})
	return nil
}

// handleKVCompareAndSet proposes a compare-and-set of a key of the job's
// register. Its body may carry a value of the cluster's MaxKVValueBytes, in
// base64, on top of the usual body limit.
func (s *Handler) handleKVCompareAndSet(w http.ResponseWriter, r *http.Request) error {
	maxValue := s.b.FSM().Limits().MaxKVValueBytes
	var in rpc.KVCompareAndSetRequest
	req, err := s.readWriteLimit(w, r, &in, s.valueBodyLimit(maxValue, 1))
	if err != nil {
		return err
	}
	if err := checkKVWrite(in.Key, in.Value, maxValue); err != nil {
		return err
	}
	c := &fsm.KVCompareAndSet{Key: in.Key, Version: in.Version, Value: in.Value}
	if answered, err := s.answerLostCompareAndSet(w, r, req, c); answered || err != nil {
		return err
	}
	res, err := s.apply(r, req, c)
	if err != nil {
		return err
	}
	if res.KV == nil {
		return rpc.Errorf(rpc.CodeInternal, "KVCompareAndSet succeeded without the key's value")
	}
	writeJSON(w, http.StatusOK, rpc.KVCompareAndSetResponse{Key: in.Key, Swapped: res.Swapped, Found: res.KV.Found,
		Value: res.KV.Value, Version: res.KV.Version, AppliedAt: FSMTime(res.Clock)})
	return nil
}

// answerLostCompareAndSet answers c, the compare-and-set of request req,
// without proposing it when the log would answer it "not swapped" anyway
// (fsm.KVCompareAndSetLost): the agents of a large rendezvous lose most of
// their compare-and-sets, and each would otherwise be a log entry of the
// whole state, written on every replica. It reads after a read barrier, so
// the answer is as linearizable as a read's; it counts as a keep-alive of
// the request's session, as a write does. It reports false, with no error,
// when c must go through the log, and an error only for a malformed
// request.
func (s *Handler) answerLostCompareAndSet(w http.ResponseWriter, r *http.Request, req fsm.RequestID, c *fsm.KVCompareAndSet) (bool, error) {
	if c.Version == 0 {
		return false, nil
	}
	session, err := parseSession(r)
	if err != nil {
		return false, err
	}
	if _, err := parseAttach(r, session); err != nil {
		return false, err
	}
	if s.b.ReadBarrier(r.Context()) != nil {
		// Not a leader that may read: the write's own path answers.
		return false, nil
	}
	h := c.Hdr()
	h.Job, h.Request, h.Session = jobOf(r), req, session
	v, lost := s.b.FSM().KVCompareAndSetLost(c)
	if !lost {
		return false, nil
	}
	if session != 0 {
		if k, ok := s.leaderKeeper(); ok {
			k.Touch(session)
		}
	}
	writeJSON(w, http.StatusOK, rpc.KVCompareAndSetResponse{Key: c.Key, Swapped: false, Found: v.Found,
		Value: v.Value, Version: v.Version, AppliedAt: FSMTime(s.b.FSM().Clock())})
	return true, nil
}

// handleKVDelete proposes a delete of a key of the job's register.
func (s *Handler) handleKVDelete(w http.ResponseWriter, r *http.Request) error {
	var in rpc.KVDeleteRequest
	req, err := s.readWrite(w, r, &in)
	if err != nil {
		return err
	}
	if err := checkKVKey(in.Key); err != nil {
		return err
	}
	res, err := s.apply(r, req, &fsm.KVDelete{Key: in.Key, Version: in.Version})
	if err != nil {
		return err
	}
	if res.KV == nil {
		return rpc.Errorf(rpc.CodeInternal, "KVDelete succeeded without the key's version")
	}
	writeJSON(w, http.StatusOK, rpc.KVDeleteResponse{Key: in.Key, Deleted: res.Deleted > 0, Found: res.KV.Found,
		Version: res.KV.Version, AppliedAt: FSMTime(res.Clock)})
	return nil
}

// handleKVDeletePrefix proposes a delete of every key under a prefix.
func (s *Handler) handleKVDeletePrefix(w http.ResponseWriter, r *http.Request) error {
	var in rpc.KVDeletePrefixRequest
	req, err := s.readWrite(w, r, &in)
	if err != nil {
		return err
	}
	if err := fsm.ValidateKVPrefix(in.Prefix); err != nil {
		return invalidFromFSM(err)
	}
	res, err := s.apply(r, req, &fsm.KVDeletePrefix{Prefix: in.Prefix})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rpc.KVDeletePrefixResponse{Prefix: in.Prefix, Deleted: res.Deleted, AppliedAt: FSMTime(res.Clock)})
	return nil
}

// handleKVAdd proposes an integer add to a key of the job's register.
func (s *Handler) handleKVAdd(w http.ResponseWriter, r *http.Request) error {
	var in rpc.KVAddRequest
	req, err := s.readWrite(w, r, &in)
	if err != nil {
		return err
	}
	if err := checkKVKey(in.Key); err != nil {
		return err
	}
	res, err := s.apply(r, req, &fsm.KVAdd{Key: in.Key, Delta: in.Amount})
	if err != nil {
		return err
	}
	if res.KV == nil {
		return rpc.Errorf(rpc.CodeInternal, "KVAdd succeeded without the key's version")
	}
	writeJSON(w, http.StatusOK, rpc.KVAddResponse{Key: in.Key, Value: res.Sum, Version: res.KV.Version, AppliedAt: FSMTime(res.Clock)})
	return nil
}

// kvKeysBytes is what n register keys may take in a JSON body, every byte
// escaped.
func kvKeysBytes(n int) int64 { return int64(n) * (6*fsm.MaxKVKeyLen + 8) }

// handleKVMultiSet proposes a multi-set. Its body may carry the base64 of
// the cluster's MaxKVValueBytes and the keys of MaxJobKVKeys on top of the
// usual body limit. Values past the value limit together are refused
// before anything is proposed; the state machine counts the new keys
// against the key limit.
func (s *Handler) handleKVMultiSet(w http.ResponseWriter, r *http.Request) error {
	l := s.b.FSM().Limits()
	var in rpc.KVMultiSetRequest
	limit := s.valueBodyLimit(l.MaxKVValueBytes, 1) + kvKeysBytes(l.MaxJobKVKeys)
	req, err := s.readWriteLimit(w, r, &in, limit)
	if err != nil {
		return err
	}
	if len(in.Pairs) == 0 {
		return invalidf("a multi-set names no key")
	}
	seen := make(map[string]bool, len(in.Pairs))
	pairs := make([]fsm.KVPair, len(in.Pairs))
	var total int64
	for i, p := range in.Pairs {
		if err := checkKVKey(p.Key); err != nil {
			return err
		}
		if seen[p.Key] {
			return invalidf("key %q is set twice in one multi-set", p.Key)
		}
		seen[p.Key] = true
		total += int64(len(p.Value))
		pairs[i] = fsm.KVPair{Key: p.Key, Value: p.Value}
	}
	if total > l.MaxKVValueBytes {
		return rpc.Errorf(rpc.CodeLimit, "limit max_kv_value_bytes (%d) exceeded: values of %d bytes together for %d keys", l.MaxKVValueBytes, total, len(pairs))
	}
	res, err := s.apply(r, req, &fsm.KVMultiSet{Pairs: pairs})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rpc.KVMultiSetResponse{Versions: res.Versions, AppliedAt: FSMTime(res.Clock)})
	return nil
}

// handleKVAppend proposes an append to a key of the job's register. Its
// body may carry the base64 of the cluster's MaxKVValueBytes on top of the
// usual body limit.
func (s *Handler) handleKVAppend(w http.ResponseWriter, r *http.Request) error {
	maxValue := s.b.FSM().Limits().MaxKVValueBytes
	var in rpc.KVAppendRequest
	req, err := s.readWriteLimit(w, r, &in, s.valueBodyLimit(maxValue, 1))
	if err != nil {
		return err
	}
	if err := checkKVWrite(in.Key, in.Value, maxValue); err != nil {
		return err
	}
	res, err := s.apply(r, req, &fsm.KVAppend{Key: in.Key, Value: in.Value})
	if err != nil {
		return err
	}
	if res.KV == nil {
		return rpc.Errorf(rpc.CodeInternal, "KVAppend succeeded without the key's version")
	}
	writeJSON(w, http.StatusOK, rpc.KVAppendResponse{Key: in.Key, Length: res.Length, Version: res.KV.Version, AppliedAt: FSMTime(res.Clock)})
	return nil
}

// handleKVCompareValue proposes a compare-and-set by value. Its body may
// carry two values of the cluster's MaxKVValueBytes, in base64, on top of
// the usual body limit.
func (s *Handler) handleKVCompareValue(w http.ResponseWriter, r *http.Request) error {
	maxValue := s.b.FSM().Limits().MaxKVValueBytes
	var in rpc.KVCompareValueRequest
	req, err := s.readWriteLimit(w, r, &in, s.valueBodyLimit(maxValue, 2))
	if err != nil {
		return err
	}
	if err := checkKVWrite(in.Key, in.Desired, maxValue); err != nil {
		return err
	}
	if n := len(in.Expected); n > fsm.MaxKVValueBytesCeiling {
		return invalidf("an expected value of %d bytes exceeds %d", n, fsm.MaxKVValueBytesCeiling)
	}
	res, err := s.apply(r, req, &fsm.KVCompareValue{Key: in.Key, Expected: in.Expected, Desired: in.Desired})
	if err != nil {
		return err
	}
	if res.KV == nil {
		return rpc.Errorf(rpc.CodeInternal, "KVCompareValue succeeded without the key's value")
	}
	writeJSON(w, http.StatusOK, rpc.KVCompareValueResponse{Key: in.Key, Swapped: res.Swapped, Found: res.KV.Found,
		Value: res.KV.Value, Version: res.KV.Version, AppliedAt: FSMTime(res.Clock)})
	return nil
}

// maxKVMultiGetBytes bounds the values one multi-get answers together
// (a variable only so that tests can lower it).
var maxKVMultiGetBytes = 64 << 20

// handleKVMultiGet reads several keys of the job's register at one point
// of the log, at the leader after a read barrier, as handleKVGet reads one.
func (s *Handler) handleKVMultiGet(w http.ResponseWriter, r *http.Request) error {
	maxKeys := s.b.FSM().Limits().MaxJobKVKeys
	var in rpc.KVMultiGetRequest
	if err := decodeBody(w, r, s.cfg.Limits.MaxBodyBytes+kvKeysBytes(maxKeys), &in, false); err != nil {
		return err
	}
	if len(in.Keys) == 0 || len(in.Keys) > maxKeys {
		return invalidf("a multi-get of %d keys: it reads 1 to max_job_kv_keys (%d)", len(in.Keys), maxKeys)
	}
	for _, key := range in.Keys {
		if err := checkKVKey(key); err != nil {
			return err
		}
	}
	if err := s.b.ReadBarrier(r.Context()); err != nil {
		return readError(err)
	}
	values := s.b.FSM().KVMulti(jobOf(r), in.Keys)
	out := rpc.KVMultiGetResponse{Values: make([]rpc.KVGetResponse, len(values))}
	total := 0
	for i, v := range values {
		total += len(v.Value)
		out.Values[i] = rpc.KVGetResponse{Key: in.Keys[i], Found: v.Found, Value: v.Value, Version: v.Version}
	}
	if total > maxKVMultiGetBytes {
		return rpc.Errorf(rpc.CodeTooLarge, "the %d keys hold %d bytes together, over the %d one multi-get answers; read them in parts",
			len(in.Keys), total, maxKVMultiGetBytes)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleKVNumKeys counts the keys of the job's register, or those under a
// prefix, at the leader after a read barrier.
func (s *Handler) handleKVNumKeys(w http.ResponseWriter, r *http.Request) error {
	prefix := r.URL.Query().Get(rpc.KVParamPrefix)
	if prefix != "" {
		if err := fsm.ValidateKVPrefix(prefix); err != nil {
			return invalidFromFSM(err)
		}
	}
	if err := s.b.ReadBarrier(r.Context()); err != nil {
		return readError(err)
	}
	writeJSON(w, http.StatusOK, rpc.KVNumKeysResponse{Prefix: prefix, Count: s.b.FSM().KVCount(jobOf(r), prefix)})
	return nil
}

// checkKVKey checks a register key with the state machine's rule, before
// anything is read or proposed.
func checkKVKey(key string) error {
	if err := fsm.ValidateKVKey(key); err != nil {
		return invalidFromFSM(err)
	}
	return nil
}

// valueBodyLimit is the body limit of a register write that carries n
// values of up to maxValue bytes, in base64, on top of the usual limit.
func (s *Handler) valueBodyLimit(maxValue int64, n int) int64 {
	return s.cfg.Limits.MaxBodyBytes + int64(n)*int64(base64.StdEncoding.EncodedLen(int(maxValue)))
}

// checkKVWrite checks the key of a register write and the size of the
// value it stores, before anything is proposed.
func checkKVWrite(key string, value []byte, maxValue int64) error {
	if err := checkKVKey(key); err != nil {
		return err
	}
	if n := int64(len(value)); n > maxValue {
		return rpc.Errorf(rpc.CodeLimit, "limit max_kv_value_bytes (%d) exceeded: a value of %d bytes for key %q", maxValue, n, key)
	}
	return nil
}
