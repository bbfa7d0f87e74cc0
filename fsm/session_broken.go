//go:build chaos_broken_sessions

package fsm

// endedSession is deliberately wrong in this build: a request under a
// session that has ended opens it again, under its id and the shortest
// TTL, and is applied as if the session had never ended. The tasks the
// session held went back when it ended, and others may hold them since.
func endedSession(s *state, id uint64) *session {
	if id > s.sessionSeq {
		return nil // never opened
	}
	ss := &session{id: id, ttl: int64(MinSessionTTL), opened: s.clock, seen: s.clock}
	s.sessions[id] = ss
	return ss
}
