//go:build !chaos_broken_finish

package chaos

import "net/http"

// brokenFinish returns a trainer's transport as it is. The
// chaos_broken_finish build tag replaces it with a deliberately wrong
// one, to show that the fault-injection checks catch a cluster whose
// GetTask leases the next task but drops the finish it carried.
func brokenFinish(rt http.RoundTripper) http.RoundTripper { return rt }
