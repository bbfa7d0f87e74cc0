//go:build !chaos_broken_sessions

package fsm

// endedSession returns nothing: a request under a session that has ended
// is refused. The chaos_broken_sessions build tag replaces it with a
// deliberately wrong one, to show that the fault-injection checks catch an
// FSM that applies the requests of an ended session.
func endedSession(*state, uint64) *session { return nil }
