//go:build chaos_broken_fsm

package fsm

// afterRestore is deliberately wrong in this build: it forgets the lease of
// the first pending task, moving it to done as if it had been finished, so a
// replica restored from a snapshot loses that task for the pass, in every
// job.
func afterRestore(s *state) {
	for _, name := range sortedKeys(s.jobs) {
		j := s.jobs[name]
		if i := j.queues[qPending].head; i >= 0 {
			j.unlink(i)
			j.pushBack(qDone, i)
		}
	}
}
