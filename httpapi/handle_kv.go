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
	req, err := s.readWriteLimit(w, r, &in, s.cfg.Limits.MaxBodyBytes+int64(base64.StdEncoding.EncodedLen(int(maxValue))))
	if err != nil {
		return err
	}
	if err := checkKVKey(in.Key); err != nil {
		return err
	}
	if n := int64(len(in.Value)); n > maxValue {
		return rpc.Errorf(rpc.CodeLimit, "limit max_kv_value_bytes (%d) exceeded: a value of %d bytes for key %q", maxValue, n, in.Key)
	}
	res, err := s.apply(r, req, &fsm.KVCompareAndSet{Key: in.Key, Version: in.Version, Value: in.Value})
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

// checkKVKey checks a register key with the state machine's rule, before
// anything is read or proposed.
func checkKVKey(key string) error {
	if err := fsm.ValidateKVKey(key); err != nil {
		return invalidFromFSM(err)
	}
	return nil
}
