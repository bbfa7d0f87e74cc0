package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/raftmaster/raftmaster/rpc"
)

// Status describes the leader and the state, read linearizably: the answer
// reflects every write acknowledged before the call. Its FSM summary is
// the cluster's, with the default job's dataset, pass and tasks; a client
// of a named job (WithJob) reads that job's with Job.
func (c *Client) Status() (rpc.StatusResponse, error) {
	return c.StatusContext(context.Background())
}

// StatusContext is Status bounded by ctx.
func (c *Client) StatusContext(ctx context.Context) (rpc.StatusResponse, error) {
	var resp rpc.StatusResponse
	err := c.do(ctx, &call{method: http.MethodGet, path: rpc.PathStatus, out: &resp})
	return resp, err
}

// StatusStale describes whichever node answers, from its local state,
// which may lag behind the leader.
func (c *Client) StatusStale() (rpc.StatusResponse, error) {
	return c.StatusStaleContext(context.Background())
}

// StatusStaleContext is StatusStale bounded by ctx.
func (c *Client) StatusStaleContext(ctx context.Context) (rpc.StatusResponse, error) {
	var resp rpc.StatusResponse
	err := c.do(ctx, &call{method: http.MethodGet, path: rpc.PathStatus, query: url.Values{rpc.ParamStale: {"true"}}, out: &resp})
	return resp, err
}

// Members lists the servers of the Raft configuration and summarises the
// state.
func (c *Client) Members() (rpc.ClusterResponse, error) {
	return c.MembersContext(context.Background())
}

// MembersContext is Members bounded by ctx.
func (c *Client) MembersContext(ctx context.Context) (rpc.ClusterResponse, error) {
	var resp rpc.ClusterResponse
	err := c.do(ctx, &call{method: http.MethodGet, path: rpc.PathCluster, out: &resp})
	return resp, err
}

// MembersStale is Members answered by whichever node answers, from its
// own view of the configuration and the state, which may lag behind the
// leader's: it answers while the cluster has no leader.
func (c *Client) MembersStale() (rpc.ClusterResponse, error) {
	return c.MembersStaleContext(context.Background())
}

// MembersStaleContext is MembersStale bounded by ctx.
func (c *Client) MembersStaleContext(ctx context.Context) (rpc.ClusterResponse, error) {
	var resp rpc.ClusterResponse
	err := c.do(ctx, &call{method: http.MethodGet, path: rpc.PathCluster, query: url.Values{rpc.ParamStale: {"true"}}, out: &resp})
	return resp, err
}

// AddMember asks the cluster to add the member req describes, as a node
// started with --members does, or to refresh its addresses when it is a
// member already: a new incarnation (a server id with one) is added as a
// non-voter and promoted to voter once it has caught up, so ask again
// until its status says it is a voter.
func (c *Client) AddMember(req rpc.AddMemberRequest) error {
	return c.AddMemberContext(context.Background(), req)
}

// AddMemberContext is AddMember bounded by ctx.
func (c *Client) AddMemberContext(ctx context.Context, req rpc.AddMemberRequest) error {
	return c.do(ctx, &call{method: http.MethodPost, path: rpc.PathClusterAddMember, write: true, noProbe: true, body: req})
}

// RemoveMember removes the member id from the cluster.
func (c *Client) RemoveMember(id string) error {
	return c.RemoveMemberContext(context.Background(), id)
}

// RemoveMemberContext is RemoveMember bounded by ctx.
func (c *Client) RemoveMemberContext(ctx context.Context, id string) error {
	return c.do(ctx, &call{method: http.MethodPost, path: rpc.PathClusterRemoveMember, write: true, noProbe: true,
		body: rpc.RemoveMemberRequest{ID: id}})
}

// AddNode adds member id with its Raft and API addresses.
//
// Deprecated: use AddMember, which this calls.
func (c *Client) AddNode(id, raftAddr, apiAddr string) error {
	return c.AddMember(rpc.AddMemberRequest{ID: id, RaftAddr: raftAddr, APIAddr: apiAddr})
}

// AddNodeContext is AddNode bounded by ctx.
//
// Deprecated: use AddMemberContext, which this calls.
func (c *Client) AddNodeContext(ctx context.Context, id, raftAddr, apiAddr string) error {
	return c.AddMemberContext(ctx, rpc.AddMemberRequest{ID: id, RaftAddr: raftAddr, APIAddr: apiAddr})
}

// AddServer is AddMember under its earlier name.
//
// Deprecated: use AddMember, which this calls.
func (c *Client) AddServer(req rpc.AddMemberRequest) error {
	return c.AddMember(req)
}

// AddServerContext is AddServer bounded by ctx.
//
// Deprecated: use AddMemberContext, which this calls.
func (c *Client) AddServerContext(ctx context.Context, req rpc.AddMemberRequest) error {
	return c.AddMemberContext(ctx, req)
}

// RemoveNode is RemoveMember under its earlier name.
//
// Deprecated: use RemoveMember, which this calls.
func (c *Client) RemoveNode(id string) error {
	return c.RemoveMember(id)
}

// RemoveNodeContext is RemoveNode bounded by ctx.
//
// Deprecated: use RemoveMemberContext, which this calls.
func (c *Client) RemoveNodeContext(ctx context.Context, id string) error {
	return c.RemoveMemberContext(ctx, id)
}

// TransferLeadership hands leadership to node id, or to the most
// up-to-date follower when id is "".
func (c *Client) TransferLeadership(id string) error {
	return c.TransferLeadershipContext(context.Background(), id)
}

// TransferLeadershipContext is TransferLeadership bounded by ctx.
func (c *Client) TransferLeadershipContext(ctx context.Context, id string) error {
	return c.do(ctx, &call{method: http.MethodPost, path: rpc.PathClusterTransfer, write: true, noProbe: true,
		body: rpc.TransferRequest{ID: id}})
}

// DebugState asks the node at addr, and only that node, for its applied
// index and the hash of its state. Replicas at the same index must report
// the same hash.
func (c *Client) DebugState(addr string) (rpc.DebugStateResponse, error) {
	return c.DebugStateContext(context.Background(), addr)
}

// DebugStateContext is DebugState bounded by ctx.
func (c *Client) DebugStateContext(ctx context.Context, addr string) (rpc.DebugStateResponse, error) {
	var resp rpc.DebugStateResponse
	base, err := c.normalize(addr)
	if err != nil {
		return resp, err
	}
	err = c.do(ctx, &call{method: http.MethodGet, path: rpc.PathDebugState, out: &resp, addr: base})
	return resp, err
}

// Health returns nil when the first address is ready to serve: it has a
// leader and has caught up.
func (c *Client) Health(ctx context.Context) error {
	err := c.do(ctx, &call{method: http.MethodGet, path: rpc.PathReadyz, addr: c.addrs[0]})
	if err != nil {
		return fmt.Errorf("raftmaster client: %s not ready: %w", c.addrs[0], err)
	}
	return nil
}

// Jobs lists every job, sorted by name, with the limits in effect, from
// the local state of whichever node answers.
func (c *Client) Jobs() (rpc.JobsResponse, error) {
	return c.JobsContext(context.Background())
}

// JobsContext is Jobs bounded by ctx.
func (c *Client) JobsContext(ctx context.Context) (rpc.JobsResponse, error) {
	var resp rpc.JobsResponse
	err := c.do(ctx, &call{method: http.MethodGet, path: rpc.PathJobs, out: &resp})
	return resp, err
}

// Job describes the job named name; ErrUnknownJob when there is none.
func (c *Client) Job(name string) (rpc.Job, error) {
	return c.JobContext(context.Background(), name)
}

// JobContext is Job bounded by ctx.
func (c *Client) JobContext(ctx context.Context, name string) (rpc.Job, error) {
	var resp rpc.Job
	err := c.do(ctx, &call{method: http.MethodGet, path: rpc.JobRoute(rpc.PathJob, url.PathEscape(name)), out: &resp})
	return resp, err
}

// CreateJob creates the job named name, empty. It reports false when the
// job existed already, which changes nothing.
func (c *Client) CreateJob(name string) (bool, error) {
	return c.CreateJobContext(context.Background(), name)
}

// CreateJobContext is CreateJob bounded by ctx.
func (c *Client) CreateJobContext(ctx context.Context, name string) (bool, error) {
	var resp rpc.JobResponse
	err := c.do(ctx, &call{method: http.MethodPost, path: rpc.JobRoute(rpc.PathJobCreate, url.PathEscape(name)), write: true,
		body: rpc.JobRequest{}, out: &resp})
	return err == nil && !resp.Ignored, err
}

// DeleteJob deletes the job named name with everything it holds: its
// dataset, tasks, leases and allgather groups, whose watchers get
// ErrClosed. A job created later under the same name starts from nothing.
// ErrUnknownJob when there is no such job.
func (c *Client) DeleteJob(name string) error {
	return c.DeleteJobContext(context.Background(), name)
}

// DeleteJobContext is DeleteJob bounded by ctx.
func (c *Client) DeleteJobContext(ctx context.Context, name string) error {
	return c.do(ctx, &call{method: http.MethodPost, path: rpc.JobRoute(rpc.PathJobDelete, url.PathEscape(name)), write: true,
		body: rpc.JobRequest{}})
}

// Limits returns the cluster's limits in effect, read at the leader: the
// same on every replica, seeded by a new cluster's serve flags and changed
// by SetLimits.
func (c *Client) Limits() (rpc.Limits, error) {
	return c.LimitsContext(context.Background())
}

// LimitsContext is Limits bounded by ctx.
func (c *Client) LimitsContext(ctx context.Context) (rpc.Limits, error) {
	var resp rpc.Limits
	err := c.do(ctx, &call{method: http.MethodGet, path: rpc.PathLimits, out: &resp})
	return resp, err
}

// SetLimits changes the cluster's limits: only the fields change sets
// change, 0 meaning the limit's default, and it returns the limits in
// effect afterwards. A value out of range is ErrInvalid, and nothing
// changes. A cluster not yet upgraded to protocol level 2 answers
// unavailable, which is retried while the client's retry budget lasts.
func (c *Client) SetLimits(change rpc.LimitsRequest) (rpc.Limits, error) {
	return c.SetLimitsContext(context.Background(), change)
}

// SetLimitsContext is SetLimits bounded by ctx.
func (c *Client) SetLimitsContext(ctx context.Context, change rpc.LimitsRequest) (rpc.Limits, error) {
	var resp rpc.Limits
	err := c.do(ctx, &call{method: http.MethodPost, path: rpc.PathLimitsSet, write: true, body: change, out: &resp})
	return resp, err
}
