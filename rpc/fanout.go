package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// maxStatusBody bounds a member's status response.
const maxStatusBody = 1 << 20

// probeMembers fills each member's own view (state, term, indexes, last
// contact) concurrently: this node from the backend, the others from their
// GET /v1/status?stale, each within FanoutTimeout. A member that cannot be
// asked gets Error.
func (s *Server) probeMembers(ctx context.Context, members []Member) {
	var wg sync.WaitGroup
	for i := range members {
		m := &members[i]
		if m.ID == s.b.NodeID() {
			m.fill(s.b.Status())
			continue
		}
		wg.Go(func() {
			st, err := s.memberStatus(ctx, m.APIAddr)
			if err != nil {
				m.Error = err.Error()
				return
			}
			m.fill(st)
		})
	}
	wg.Wait()
}

func (m *Member) fill(st StatusResponse) {
	m.State, m.Term = st.State, st.Term
	m.LastIndex, m.CommitIndex, m.AppliedIndex = st.LastIndex, st.CommitIndex, st.AppliedIndex
	m.LastContact = st.LastContact
}

func (s *Server) memberStatus(ctx context.Context, addr string) (StatusResponse, error) {
	var st StatusResponse
	if addr == "" {
		return st, fmt.Errorf("no API address registered")
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.FanoutTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL(addr)+PathStatus+"?stale", nil)
	if err != nil {
		return st, err
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
		var e Error
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
