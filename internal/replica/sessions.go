package replica

import (
	"errors"
	"fmt"
	"time"

	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/internal/sessions"
	"github.com/raftmaster/raftmaster/rpc"
)

var _ httpapi.SessionBackend = raftBackend{}

// Sessions implements httpapi.SessionBackend: the keep-alive table of the
// term this node leads, once it has taken over.
func (b raftBackend) Sessions() (httpapi.SessionKeeper, bool) {
	t, ok := b.node.Sessions()
	if !ok {
		return nil, false
	}
	return sessionKeeper{t}, true
}

// sessionKeeper is a term's tracker in the API's terms: once the term has
// ended, it answers httpapi.ErrNotLeader, which sends the client to the
// leader.
type sessionKeeper struct{ t *sessions.Tracker }

func (k sessionKeeper) KeepAlive(id uint64, owner [16]byte, progress []rpc.SessionProgress) (time.Duration, error) {
	d, err := k.t.KeepAlive(id, owner, progress)
	if errors.Is(err, sessions.ErrStopped) {
		err = fmt.Errorf("%w: %v", httpapi.ErrNotLeader, err)
	}
	return d, err
}

func (k sessionKeeper) Touch(id uint64) { k.t.Touch(id) }

func (k sessionKeeper) Remaining(id uint64) (time.Duration, bool) { return k.t.Remaining(id) }
