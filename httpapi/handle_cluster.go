package httpapi

import (
	"net/http"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/version"
	"github.com/raftmaster/raftmaster/rpc"
)

// stale reports whether the request asked for a stale read (?stale with
// any value, or none).
func stale(r *http.Request) bool { return r.URL.Query().Has(rpc.ParamStale) }

// handleStatus describes this node. Without ?stale the read is
// linearizable: only the leader answers, after a read barrier, and a
// follower redirects.
func (s *Handler) handleStatus(w http.ResponseWriter, r *http.Request) error {
	if !stale(r) {
		if err := s.b.ReadBarrier(r.Context()); err != nil {
			return readError(err)
		}
	}
	st := s.status()
	if g, ok := grantOf(r); ok && !g.Covers(fsm.DefaultJob) {
		// The summary is the default job's, which this token may not
		// read: it keeps the node's and the cluster's figures only.
		st.FSM = rpc.Stats{Clock: st.FSM.Clock, Nodes: st.FSM.Nodes, AppliedIndex: st.FSM.AppliedIndex}
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// status is this node's status with the state summary and the build.
func (s *Handler) status() rpc.StatusResponse {
	st := s.b.Status()
	st.FSM = StatsFromFSM(s.b.FSM().Stats(fsm.DefaultJob))
	st.Version = version.String()
	st.Protocol = fsm.Protocol
	st.ClusterProtocol = s.b.FSM().Protocol()
	return st
}

// handleCluster lists the members with what each one reports about itself,
// and summarises the state. It is a leader read unless ?stale is given.
func (s *Handler) handleCluster(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if !stale(r) {
		if err := s.b.ReadBarrier(ctx); err != nil {
			return readError(err)
		}
	}
	members, err := s.b.Members(ctx)
	if err != nil {
		return readError(err)
	}
	s.probeMembers(ctx, members, requestScheme(r), r.Header.Get(rpc.HeaderAuthorization))
	out := rpc.ClusterResponse{Members: members, FSM: StatsFromFSM(s.b.FSM().Stats(fsm.DefaultJob)), Groups: GroupsFromFSM(s.b.FSM().Groups(fsm.DefaultJob)),
		Jobs: jobsWithDatasets(s.b.FSM()), ClusterProtocol: s.b.FSM().Protocol()}
	if l, ok := s.b.Leader(); ok {
		out.Leader = l
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleAddMember adds a member, or refreshes its registry entry.
func (s *Handler) handleAddMember(w http.ResponseWriter, r *http.Request) error {
	var in rpc.AddMemberRequest
	if err := decodeBody(w, r, s.cfg.Limits.MaxBodyBytes, &in, false); err != nil {
		return err
	}
	if err := checkID("id", in.ID); err != nil {
		return err
	}
	if err := checkID("raft_addr", in.RaftAddr); err != nil {
		return err
	}
	if err := checkID("api_addr", in.APIAddr); err != nil {
		return err
	}
	if err := s.b.AddMember(r.Context(), in); err != nil {
		return err
	}
	s.log.Info("added member", "id", in.ID, "raft_addr", in.RaftAddr, "api_addr", in.APIAddr)
	writeJSON(w, http.StatusOK, rpc.OKResponse{Status: "ok"})
	return nil
}

// handleRemoveMember removes a member.
func (s *Handler) handleRemoveMember(w http.ResponseWriter, r *http.Request) error {
	var in rpc.RemoveMemberRequest
	if err := decodeBody(w, r, s.cfg.Limits.MaxBodyBytes, &in, false); err != nil {
		return err
	}
	if err := checkID("id", in.ID); err != nil {
		return err
	}
	if err := s.b.RemoveMember(r.Context(), in.ID); err != nil {
		return err
	}
	s.log.Info("removed member", "id", in.ID)
	writeJSON(w, http.StatusOK, rpc.OKResponse{Status: "ok"})
	return nil
}

// handleClusterTransfer moves leadership. An empty body or id lets the
// backend pick the follower.
func (s *Handler) handleClusterTransfer(w http.ResponseWriter, r *http.Request) error {
	var in rpc.TransferRequest
	if err := decodeBody(w, r, s.cfg.Limits.MaxBodyBytes, &in, true); err != nil {
		return err
	}
	if in.ID != "" {
		if err := checkID("id", in.ID); err != nil {
			return err
		}
	}
	if err := s.b.Transfer(r.Context(), in.ID); err != nil {
		return err
	}
	s.log.Info("transferred leadership", "to", in.ID)
	writeJSON(w, http.StatusOK, rpc.OKResponse{Status: "ok"})
	return nil
}

// handleDebugState returns the local applied index and state hash, read
// so that both describe the same state.
func (s *Handler) handleDebugState(w http.ResponseWriter, r *http.Request) error {
	f := s.b.FSM()
	out := rpc.DebugStateResponse{NodeID: s.b.NodeID()}
	for range 100 {
		before := f.AppliedIndex()
		out.Hash = f.StateHash()
		out.AppliedIndex = f.AppliedIndex()
		if out.AppliedIndex == before {
			writeJSON(w, http.StatusOK, out)
			return nil
		}
	}
	return rpc.Errorf(rpc.CodeUnavailable, "state keeps changing; retry")
}

// handleHealthz says the process serves HTTP.
func (s *Handler) handleHealthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, rpc.OKResponse{Status: "ok"})
	return nil
}

// handleReadyz says whether the node has a leader and has caught up.
func (s *Handler) handleReadyz(w http.ResponseWriter, r *http.Request) error {
	if !s.b.Ready() {
		return rpc.Errorf(rpc.CodeUnavailable, "not ready: no leader or still catching up")
	}
	writeJSON(w, http.StatusOK, rpc.OKResponse{Status: "ok"})
	return nil
}
