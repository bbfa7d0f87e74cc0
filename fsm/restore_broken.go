//go:build chaos_broken_fsm

package fsm

// afterRestore is deliberately wrong in this build: it forgets the lease of
// the first pending task, moving it to done as if it had been finished, so a
// replica restored from a snapshot loses that task for the pass.
func afterRestore(s *state) {
	if i := s.queues[qPending].head; i >= 0 {
		s.unlink(i)
		s.pushBack(qDone, i)
	}
}
