package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// watchQuery is a parsed watch request.
type watchQuery struct {
	group       string
	member      uuid.UUID
	gen         uint64
	wait        time.Duration
	seenOverdue bool
}

func (s *Handler) parseWatch(q url.Values) (watchQuery, error) {
	var wq watchQuery
	wq.group = q.Get(rpc.WatchParamGroup)
	if err := checkID(rpc.WatchParamGroup, wq.group); err != nil {
		return wq, err
	}
	m, err := uuid.Parse(q.Get(rpc.WatchParamMember))
	if err != nil {
		return wq, invalidf("%s %q is not a UUID", rpc.WatchParamMember, q.Get(rpc.WatchParamMember))
	}
	if err := checkMember(m); err != nil {
		return wq, err
	}
	wq.member = m
	wq.gen, err = strconv.ParseUint(q.Get(rpc.WatchParamGeneration), 10, 64)
	if err != nil || wq.gen == 0 {
		return wq, invalidf("%s %q is not a positive integer", rpc.WatchParamGeneration, q.Get(rpc.WatchParamGeneration))
	}
	if v := q.Get(rpc.WatchParamSeenOverdue); v != "" {
		if wq.seenOverdue, err = strconv.ParseBool(v); err != nil {
			return wq, invalidf("%s %q is not a boolean", rpc.WatchParamSeenOverdue, v)
		}
	}
	wq.wait = min(DefaultWatchWait, s.cfg.Limits.MaxWatchWait)
	if v := q.Get(rpc.WatchParamWait); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return wq, invalidf("%s %q is not a duration such as \"30s\"", rpc.WatchParamWait, v)
		}
		if err := checkDuration(rpc.WatchParamWait, d, 0, s.cfg.Limits.MaxWatchWait); err != nil {
			return wq, err
		}
		wq.wait = d
	}
	return wq, nil
}

// handleWatch is the allgather long poll. It answers from the local FSM,
// so followers serve it too (unless the backend says its followers cannot,
// see FollowerReads). A replica that has not applied the join yet answers
// pending (fsm.FSM.Watch), so no final answer comes from a state that
// predates the join. It returns when the join's outcome is final, when the
// group turns overdue (unless the caller has seen that), or "pending" when
// the wait runs out. It wakes only when its group's outcome or its
// member's slot changes (fsm.FSM.WatchWait), not for every applied entry.
func (s *Handler) handleWatch(w http.ResponseWriter, r *http.Request) error {
	wq, err := s.parseWatch(r.URL.Query())
	if err != nil {
		return err
	}
	if fr, ok := s.b.(FollowerReads); ok && !fr.ServesFollowerReads() {
		if l, ok := s.b.Leader(); !ok || l.ID != s.b.NodeID() {
			if ok {
				return ErrNotLeader
			}
			return ErrNoLeader
		}
	}
	f := s.b.FSM()
	timer := time.NewTimer(wq.wait)
	defer timer.Stop()
	for {
		// WatchWait looks and registers the wait under one read lock of
		// the FSM, so no change goes unnoticed.
		res, wait := f.WatchWait(jobOf(r), wq.group, wq.member, wq.gen)
		switch {
		case res.Status == fsm.WatchComplete:
			wait.Release()
			writeWatchComplete(w, res)
			return nil
		case res.Status == fsm.WatchPending && res.Overdue && !wq.seenOverdue:
			wait.Release()
			writeJSON(w, http.StatusOK, rpc.WatchResponse{Status: rpc.WatchPending, Overdue: true})
			return nil
		case res.Status != fsm.WatchPending:
			wait.Release()
			return rpc.Errorf(fsm.CodeOf(res.Err()).String(), "group %q member %s generation %d: %v", wq.group, wq.member, wq.gen, res.Err())
		}
		if s.watchWaiting != nil {
			s.watchWaiting()
		}
		select {
		case <-wait.Group:
		case <-wait.Member:
		case <-timer.C:
			wait.Release()
			writeJSON(w, http.StatusOK, rpc.WatchResponse{Status: rpc.WatchPending, Overdue: res.Overdue})
			return nil
		case <-r.Context().Done():
			wait.Release()
			return rpc.Errorf(rpc.CodeUnavailable, "watch cancelled: %v", r.Context().Err())
		}
		wait.Release()
	}
}

// watchCompletePrefix starts a complete watch response, up to its data.
var watchCompletePrefix = func() []byte {
	status, _ := json.Marshal(rpc.WatchComplete) // a constant string
	return []byte(`{"status":` + string(status) + `,"data":`)
}()

// writeWatchComplete writes the complete answer: byte for byte the JSON of
// rpc.WatchResponse{Status: complete, Data, Rank}, as writeJSON would
// write it. The data array is encoded once per completion of the group,
// memoized in its fsm.Gathered and shared by all its watches; only the
// rank that follows it is each watch's own. So answering n watches of a
// group of n members costs n writes of the array, not n encodings of it.
func writeWatchComplete(w http.ResponseWriter, res fsm.WatchResult) {
	if res.Gathered == nil || len(res.Data) == 0 {
		writeJSON(w, http.StatusOK, rpc.WatchResponse{Status: rpc.WatchComplete, Data: rawData(res.Data), Rank: res.Rank})
		return
	}
	data := res.Gathered.Encoded(encodeWatchData)
	suffix := strconv.AppendInt([]byte(`,"rank":`), int64(res.Rank), 10)
	suffix = append(suffix, "}\n"...)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(watchCompletePrefix)+len(data)+len(suffix)))
	w.WriteHeader(http.StatusOK)
	for _, b := range [][]byte{watchCompletePrefix, data, suffix} {
		if _, err := w.Write(b); err != nil {
			return // the caller went away
		}
	}
}

// encodeWatchData encodes the data array of a complete watch response as
// json.Marshal encodes rpc.WatchResponse.Data. Its size is bounded by the
// group's data (fsm.MaxGroupData): each member's value compacted, where a
// byte takes at most six (an HTML-escaped character), plus a comma.
func encodeWatchData(data [][]byte) []byte {
	b, err := json.Marshal(rawData(data))
	if err != nil {
		// rawData makes every element valid JSON; keep the answer
		// well-formed all the same.
		return []byte("[]")
	}
	return b
}

// rawData turns member data into JSON values. Data that is not valid JSON
// (it cannot come through this API) is sent as a JSON string, so one bad
// member cannot break the response.
func rawData(data [][]byte) []json.RawMessage {
	out := make([]json.RawMessage, len(data))
	for i, d := range data {
		if json.Valid(d) {
			out[i] = d
			continue
		}
		out[i], _ = json.Marshal(string(d))
	}
	return out
}
