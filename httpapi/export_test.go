package httpapi

// SetWatchHook makes every watch of s call f just before it blocks, so
// tests can change the state while a long poll is known to be waiting.
func SetWatchHook(s *Handler, f func()) { s.watchWaiting = f }

// SetMaxKVMultiGetBytes sets the bound of a multi-get's answer until the
// test ends.
func SetMaxKVMultiGetBytes(t interface{ Cleanup(func()) }, n int) {
	old := maxKVMultiGetBytes
	maxKVMultiGetBytes = n
	t.Cleanup(func() { maxKVMultiGetBytes = old })
}
