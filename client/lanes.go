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
//
// The cluster forgets an identity after rpc.DedupWindow without requests,
// and then refuses its next request (ErrUnknownClient): a lane idle that
// long takes a new identity (renew) and sends that request again as its
// first, which is safe only because the refused attempt was the request's
// first (see Client.do).
type lanes struct {
	base uuid.UUID
	mu   sync.Mutex
	free []*lane
	n    int // identities minted
}

// lane is one de-duplication identity and its last sequence number.
type lane struct {
	id  uuid.UUID
	seq uint64
}

// mintLocked returns a new identity: the Client's own id first (a Client
// with one writer at a time uses only it), then name-based ids in its
// namespace.
func (l *lanes) mintLocked() uuid.UUID {
	l.n++
	if l.n == 1 {
		return l.base
	}
	return uuid.NewSHA1(l.base, []byte(strconv.Itoa(l.n)))
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
	return &lane{id: l.mintLocked()}
}

// release returns ln for reuse once its write is over.
func (l *lanes) release(ln *lane) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.free = append(l.free, ln)
}

// renew gives ln, whose identity the cluster no longer holds, a new one,
// whose next request is its first.
func (l *lanes) renew(ln *lane) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ln.id, ln.seq = l.mintLocked(), 0
}

// next returns the lane's next request id.
func (ln *lane) next() string {
	ln.seq++
	return fmt.Sprintf("%s/%d", ln.id, ln.seq)
}
