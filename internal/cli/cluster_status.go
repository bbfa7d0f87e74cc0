package cli

import (
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/urfave/cli/v2"
)

// memberStatus is one row of cluster status: a member of the Raft
// configuration and what it answered about itself, or why it did not.
type memberStatus struct {
	ID       string `json:"id"`
	Name     string `json:"name,omitempty"`
	APIAddr  string `json:"api_addr"`
	RaftAddr string `json:"raft_addr"`
	Suffrage string `json:"suffrage"`
	// State is the member's Raft state as it reports it (Leader,
	// Follower, Candidate); empty when it did not answer.
	State        string `json:"state,omitempty"`
	Leader       bool   `json:"leader"`
	Term         uint64 `json:"term"`
	LastIndex    uint64 `json:"last_index"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	// Lag is how many entries the leader has committed that the member
	// has not applied yet; absent when no leader answered.
	Lag         *uint64 `json:"lag,omitempty"`
	LastContact string  `json:"last_contact,omitempty"`
	Version     string  `json:"version,omitempty"`
	Protocol    uint64  `json:"protocol,omitempty"`
	Error       string  `json:"error,omitempty"`
}

// clusterStatus is what cluster status prints with --json.
type clusterStatus struct {
	Leader  rpc.NodeRef    `json:"leader"`
	Members []memberStatus `json:"members"`
}

func clusterStatusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "ask every member for its state, term, indexes, lag behind the leader and version",
		UsageText: "raftmaster cluster status --addr 127.0.0.1:8001 [--member-timeout 5s] [--json | -o json]\n\n" +
			"The cluster's configuration, as any node of --addr knows it (no leader is needed),\n" +
			"names the members; each is then asked at its API address from here, so that the table\n" +
			"also shows which members this machine can reach. LAG is how many entries the leader\n" +
			"has committed that the member has not applied yet. A member that does not answer\n" +
			"within --member-timeout gets a row with its error, and the command exits 1.",
		Flags: append(clientFlags(
			&cli.DurationFlag{Name: "member-timeout", Usage: "how long to keep asking a member that does not answer", Value: 5 * time.Second},
		), outputFlags()...),
		Action: func(c *cli.Context) error {
			asJSON, err := wantJSON(c)
			if err != nil {
				return err
			}
			return withClient(c, func(cl *client.Client) error {
				// Any node's view of the configuration will do, as every
				// member is then asked itself: so the table is there when it
				// is most needed, while the cluster has no leader.
				resp, err := cl.MembersStale()
				if err != nil {
					return err
				}
				st := askMembers(resp.Members, func(addr string) (rpc.StatusResponse, error) {
					mc, err := newClientAt(c, []string{addr}, client.WithRetry(c.Duration("member-timeout")))
					if err != nil {
						return rpc.StatusResponse{}, err
					}
					defer mc.Close()
					return mc.StatusStale()
				})
				if asJSON {
					err = printJSON(c.App.Writer, st)
				} else {
					printMemberStatus(c.App.Writer, st)
				}
				if err != nil {
					return err
				}
				failed := 0
				for _, m := range st.Members {
					if m.Error != "" {
						failed++
					}
				}
				if failed > 0 {
					return cli.Exit(fmt.Sprintf("%d of %d members did not answer", failed, len(st.Members)), 1)
				}
				return nil
			})
		},
	}
}

// askMembers asks every member for its status with ask, concurrently, and
// computes each one's lag behind the leader that answered.
func askMembers(members []rpc.Member, ask func(addr string) (rpc.StatusResponse, error)) clusterStatus {
	out := clusterStatus{Members: make([]memberStatus, len(members))}
	var wg sync.WaitGroup
	for i, m := range members {
		row := &out.Members[i]
		*row = memberStatus{ID: m.ID, Name: m.Name, APIAddr: m.APIAddr, RaftAddr: m.RaftAddr, Suffrage: m.Suffrage}
		if m.APIAddr == "" {
			row.Error = "no API address registered"
			continue
		}
		wg.Go(func() {
			st, err := ask(m.APIAddr)
			if err != nil {
				row.Error = err.Error()
				return
			}
			if st.NodeID != m.ID {
				row.Error = fmt.Sprintf("the node at %s is %s, not %s", m.APIAddr, st.NodeID, m.ID)
				return
			}
			row.State, row.Term = st.State, st.Term
			row.LastIndex, row.CommitIndex, row.AppliedIndex = st.LastIndex, st.CommitIndex, st.AppliedIndex
			row.LastContact, row.Version, row.Protocol = st.LastContact, st.Version, st.Protocol
			row.Leader = st.State == "Leader"
		})
	}
	wg.Wait()
	// The leader of the highest term that answered.
	var leader *memberStatus
	for i := range out.Members {
		if m := &out.Members[i]; m.Leader && (leader == nil || m.Term > leader.Term) {
			leader = m
		}
	}
	if leader == nil {
		return out
	}
	out.Leader = rpc.NodeRef{ID: leader.ID, APIAddr: leader.APIAddr}
	for i := range out.Members {
		m := &out.Members[i]
		if m.Error != "" {
			continue
		}
		lag := uint64(0)
		if leader.CommitIndex > m.AppliedIndex {
			lag = leader.CommitIndex - m.AppliedIndex
		}
		m.Lag = &lag
	}
	return out
}

// printMemberStatus prints a row per member, then the errors of those
// that did not answer.
func printMemberStatus(w io.Writer, st clusterStatus) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAPI ADDR\tROLE\tSTATE\tTERM\tLAST\tCOMMIT\tAPPLIED\tLAG\tCONTACT\tVERSION\tERROR")
	for _, m := range st.Members {
		if m.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\tunreachable\t-\t-\t-\t-\t-\t-\t-\t%s\n", m.ID, orDash(m.APIAddr), role(m.Suffrage), m.Error)
			continue
		}
		state := m.State
		if m.Leader {
			state += " *"
		}
		lag := "-"
		if m.Lag != nil {
			lag = fmt.Sprint(*m.Lag)
		}
		version := memberVersion(rpc.Member{Version: m.Version, Protocol: m.Protocol})
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t-\n", m.ID, m.APIAddr, role(m.Suffrage), state,
			m.Term, m.LastIndex, m.CommitIndex, m.AppliedIndex, lag, orDash(m.LastContact), version)
	}
	tw.Flush()
	if st.Leader.ID == "" {
		fmt.Fprintln(w, "no member answered as the leader: LAG is unknown")
	}
}
