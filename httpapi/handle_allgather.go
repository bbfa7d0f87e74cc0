package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// joinBodyLimit is the body limit of a join: room for the member data and
// the other fields, and never below MaxBodyBytes.
func (s *Handler) joinBodyLimit() int64 {
	return max(s.cfg.Limits.MaxBodyBytes, int64(s.cfg.Limits.MaxMemberData)+64<<10)
}

// handleJoin adds a member to an allgather group. The data must be one
// JSON value; it is stored as sent.
func (s *Handler) handleJoin(w http.ResponseWriter, r *http.Request) error {
	var in rpc.JoinRequest
	req, err := s.readWriteLimit(w, r, &in, s.joinBodyLimit())
	if err != nil {
		return err
	}
	if err := checkID("group", in.Group); err != nil {
		return err
	}
	if err := checkMember(in.Member); err != nil {
		return err
	}
	if in.NumPeers < 1 || in.NumPeers > s.cfg.Limits.MaxNumPeers {
		return invalidf("num_peers %d out of range [1, %d]", in.NumPeers, s.cfg.Limits.MaxNumPeers)
	}
	if len(in.Data) == 0 || !json.Valid(in.Data) {
		return invalidf("data must be a JSON value (null is one)")
	}
	if len(in.Data) > s.cfg.Limits.MaxMemberData {
		return rpc.Errorf(rpc.CodeTooLarge, "data of %d bytes exceeds %d", len(in.Data), s.cfg.Limits.MaxMemberData)
	}
	maxDur := min(s.cfg.Limits.MaxDuration, fsm.MaxGroupTimeout)
	if err := checkDuration("timeout", time.Duration(in.Timeout), 0, maxDur); err != nil {
		return err
	}
	c := &fsm.Join{Group: in.Group, Member: in.Member, NumPeers: in.NumPeers, Data: []byte(in.Data),
		Timeout: time.Duration(in.Timeout), FailOnTimeout: in.FailOnTimeout}
	res, err := s.apply(r, req, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rpc.JoinResponse{Generation: res.Generation})
	return nil
}

// handleLeave removes a member from an allgather group.
func (s *Handler) handleLeave(w http.ResponseWriter, r *http.Request) error {
	var in rpc.LeaveRequest
	req, err := s.readWrite(w, r, &in)
	if err != nil {
		return err
	}
	if err := checkID("group", in.Group); err != nil {
		return err
	}
	if err := checkMember(in.Member); err != nil {
		return err
	}
	res, err := s.apply(r, req, &fsm.Leave{Group: in.Group, Member: in.Member})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rpc.LeaveResponse{Ignored: res.Ignored})
	return nil
}
