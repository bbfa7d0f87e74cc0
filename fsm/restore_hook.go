//go:build !chaos_broken_fsm

package fsm

// afterRestore does nothing. The chaos_broken_fsm build tag replaces it
// with a deliberately wrong restore, to show that the fault-injection checks
// catch an FSM that loses a task.
func afterRestore(*state) {}
