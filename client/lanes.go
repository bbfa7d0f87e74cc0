package client

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/google/uuid"
)

// lanes hands every write in flight its own de-duplication identity. The
// FSM remembers the last few request ids of each identity (fsm's
// DedupPerClient); were all of a Client's goroutines to share one
// identity, a write retried after many newer ones would be refused as too
// old to tell. With a lane per write in flight, an identity never has more
// than one write outstanding, so every retry is still remembered, however
// many goroutines share the Client. Lanes are reused, so the number of
// identities is the Client's peak concurrency of writes.
type lanes struct {
	base uuid.UUID
	mu   sync.Mutex
	free []*lane
	n    int
}

// lane is one de-duplication identity and its last sequence number.
type lane struct {
	id  uuid.UUID
	seq uint64
}

// acquire returns a lane that no other write is using.
func (l *lanes) acquire() *lane {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.free); n > 0 {
		ln := l.free[n-1]
		l.free = l.free[:n-1]
		return ln
	}
	l.n++
	if l.n == 1 {
		return &lane{id: l.base} // a Client with one writer at a time uses its own id
	}
	return &lane{id: uuid.NewSHA1(l.base, []byte(strconv.Itoa(l.n)))}
}

// release returns ln for reuse once its write is over.
func (l *lanes) release(ln *lane) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.free = append(l.free, ln)
}

// next returns the lane's next request id.
func (ln *lane) next() string {
	ln.seq++
	return fmt.Sprintf("%s/%d", ln.id, ln.seq)
}
