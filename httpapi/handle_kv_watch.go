package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// kvWatchLeaderCheck is how often a waiting register watch checks that
// this node still leads: one that stopped redirects its caller to the new
// leader instead of holding it on a state that may no longer advance.
const kvWatchLeaderCheck = time.Second

// kvWatchQuery is a parsed register watch.
type kvWatchQuery struct {
	key   string
	after uint64
	wait  time.Duration
}

// parseKVWatch checks a register watch's parameters. A timeout over the
// server's MaxWatchWait waits MaxWatchWait: the caller, which cannot know
// the limit, watches again.
func (s *Handler) parseKVWatch(q url.Values) (kvWatchQuery, error) {
	wq := kvWatchQuery{key: q.Get(rpc.KVParamKey)}
	if err := checkKVKey(wq.key); err != nil {
		return wq, err
	}
	if v := q.Get(rpc.KVWatchParamAfter); v != "" {
		after, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return wq, invalidf("%s %q is not a version: a whole number from 0", rpc.KVWatchParamAfter, v)
		}
		wq.after = after
	}
	maxWait := s.cfg.Limits.MaxWatchWait
	wq.wait = min(DefaultWatchWait, maxWait)
	if v := q.Get(rpc.KVWatchParamWait); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return wq, invalidf("%s %q is not a wait: a Go duration from 0s, such as 30s", rpc.KVWatchParamWait, v)
		}
		wq.wait = min(d, maxWait)
	}
	return wq, nil
}

// kvChanged reports whether v answers a watch given version after: a
// version other than after, or, for after 0, a key that exists.
func kvChanged(v fsm.KVValue, after uint64) bool {
	if after == 0 {
		return v.Found
	}
	return v.Version != after
}

// handleKVWatch is the register's long poll. Like a get, it is served at
// the leader after a read barrier, so its first look is linearizable; the
// later looks read states applied after it, each of them current when its
// entry committed. It wakes only when the watched key changes
// (fsm.FSM.KVWatchWait), not for every applied entry, and answers when the
// key's version differs from the caller's, when the wait runs out (the key
// as it is, timed out), or, when this node stops leading, with a redirect
// to the new leader.
func (s *Handler) handleKVWatch(w http.ResponseWriter, r *http.Request) error {
	wq, err := s.parseKVWatch(r.URL.Query())
	if err != nil {
		return err
	}
	if err := s.b.ReadBarrier(r.Context()); err != nil {
		return readError(err)
	}
	f, job := s.b.FSM(), jobOf(r)
	timer := time.NewTimer(wq.wait)
	defer timer.Stop()
	leads := time.NewTicker(kvWatchLeaderCheck)
	defer leads.Stop()
	for {
		v, wait := f.KVWatchWait(job, wq.key)
		if kvChanged(v, wq.after) {
			wait.Release()
			writeKVWatch(w, wq.key, v, false)
			return nil
		}
		if s.watchWaiting != nil {
			s.watchWaiting()
		}
		timedOut, err := s.awaitKV(r, wait, timer.C, leads.C)
		wait.Release()
		switch {
		case err != nil:
			return err
		case timedOut:
			// Answer the key as it is now, which a change that raced
			// with the timer may have moved.
			v := f.KV(job, wq.key)
			writeKVWatch(w, wq.key, v, !kvChanged(v, wq.after))
			return nil
		}
	}
}

// awaitKV blocks until wait's channel closes (false, nil: look again), the
// timer fires (true), this node no longer leads (ErrNotLeader, which
// redirects) or the request ends.
func (s *Handler) awaitKV(r *http.Request, wait *fsm.KVWait, timer, leads <-chan time.Time) (bool, error) {
	for {
		select {
		case <-wait.C:
			return false, nil
		case <-timer:
			return true, nil
		case <-leads:
			if l, ok := s.b.Leader(); !ok || l.ID != s.b.NodeID() {
				return false, ErrNotLeader
			}
		case <-r.Context().Done():
			return false, rpc.Errorf(rpc.CodeUnavailable, "watch cancelled: %v", r.Context().Err())
		}
	}
}

// writeKVWatch answers a register watch with what key holds.
func writeKVWatch(w http.ResponseWriter, key string, v fsm.KVValue, timedOut bool) {
	writeJSON(w, http.StatusOK, rpc.KVWatchResponse{Key: key, Found: v.Found, Value: v.Value, Version: v.Version, TimedOut: timedOut})
}
