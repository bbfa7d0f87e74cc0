package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// maxStatusBody bounds a member's status response.
const maxStatusBody = 1 << 20

// probeMembers fills each member's own view (state, term, indexes, last
// contact) concurrently: this node from the backend, the others from their
// GET /v1/status?stale, each within FanoutTimeout. A member that cannot be
// asked gets Error.
func (s *Handler) probeMembers(ctx context.Context, members []rpc.Member, scheme, authz string) {
	var wg sync.WaitGroup
	for i := range members {
		m := &members[i]
		if m.ID == s.b.NodeID() {
			fillMember(m, s.status())
			continue
		}
		wg.Go(func() {
			st, err := s.memberStatus(ctx, scheme, m.APIAddr, authz)
			if err != nil {
				m.Error = err.Error()
				return
			}
			fillMember(m, st)
		})
	}
	wg.Wait()
}

// fillMember copies what a member reported about itself into m.
func fillMember(m *rpc.Member, st rpc.StatusResponse) {
	m.State, m.Term = st.State, st.Term
	m.LastIndex, m.CommitIndex, m.AppliedIndex = st.LastIndex, st.CommitIndex, st.AppliedIndex
	m.LastContact = st.LastContact
	if st.Version != "" {
		m.Version = st.Version
		m.Protocol = max(st.Protocol, fsm.Protocol1)
	}
}

// memberStatus asks the member at addr for its status, over the scheme
// the caller used and with the caller's Authorization header, which the
// members share.
func (s *Handler) memberStatus(ctx context.Context, scheme, addr, authz string) (rpc.StatusResponse, error) {
	var st rpc.StatusResponse
	if addr == "" {
		return st, fmt.Errorf("no API address registered")
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.FanoutTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL(scheme, addr)+rpc.PathStatus+"?stale", nil)
	if err != nil {
		return st, err
	}
	if authz != "" {
		req.Header.Set(rpc.HeaderAuthorization, authz)
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusBody))
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		var e rpc.Error
		if json.Unmarshal(body, &e) == nil && e.Code != "" {
			return st, fmt.Errorf("status %d: %s", resp.StatusCode, e.Error())
		}
		return st, fmt.Errorf("status %d", resp.StatusCode)
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("decoding status: %w", err)
	}
	return st, nil
}
