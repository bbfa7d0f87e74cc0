package httpapi

// SetWatchHook makes every watch of s call f just before it blocks, so
// tests can change the state while a long poll is known to be waiting.
func SetWatchHook(s *Handler, f func()) { s.watchWaiting = f }
