package replica

import (
	"github.com/raftmaster/raftmaster/httpapi"
)

var _ httpapi.SessionBackend = raftBackend{}

// Sessions implements httpapi.SessionBackend: the keep-alive table of the
// term this node leads, once it has taken over.
func (b raftBackend) Sessions() (httpapi.SessionKeeper, bool) {
	t, ok := b.node.Sessions()
	if !ok {
		return nil, false
	}
	return t, true
}
