package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/raftnode"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/urfave/cli/v2"
)

func clusterCommand() *cli.Command {
	return &cli.Command{
		Name:  "cluster",
		Usage: "inspect the cluster, list and change its members, move leadership",
		Subcommands: []*cli.Command{
			clusterStatusCommand(),
			{
				Name:      "inspect",
				Usage:     "show the members, their Raft state, the task queue and allgather groups",
				UsageText: "raftmaster cluster inspect --addr 127.0.0.1:8001 [--json]",
				Flags:     clientFlags(outputFlags()...),
				Action: func(c *cli.Context) error {
					asJSON, err := wantJSON(c)
					if err != nil {
						return err
					}
					return withClient(c, func(cl *client.Client) error {
						resp, err := cl.Members()
						if err != nil {
							return err
						}
						if asJSON {
							return printJSON(c.App.Writer, resp)
						}
						printCluster(c.App.Writer, resp)
						return nil
					})
				},
			},
			clusterMemberCommand(),
			{
				Name:      "transfer",
				Usage:     "hand leadership to another node",
				UsageText: "raftmaster cluster transfer --addr 127.0.0.1:8001 [--to NODE]",
				Flags: clientFlags(
					&cli.StringFlag{Name: "to", Usage: "the node to lead, by name or server id (default: the most up-to-date follower)"}),
				Action: func(c *cli.Context) error {
					return withClient(c, func(cl *client.Client) error {
						if err := cl.TransferLeadership(c.String("to")); err != nil {
							return err
						}
						deadline := time.Now().Add(c.Duration("retry"))
						for {
							st, err := cl.Status()
							if err == nil && st.Leader.ID != "" && (c.String("to") == "" || st.Leader.ID == c.String("to") || raftnode.NameOf(st.Leader.ID) == c.String("to")) {
								fmt.Fprintf(c.App.Writer, "leader is now %s (%s)\n", st.Leader.ID, st.Leader.APIAddr)
								return nil
							}
							if time.Now().After(deadline) {
								return fmt.Errorf("leadership transfer requested, but the new leader was not confirmed: %v", err)
							}
							time.Sleep(100 * time.Millisecond)
						}
					})
				},
			},
			// The earlier names of member add and member remove.
			earlierName(memberAddCommand(), "join", "member add"),
			earlierName(memberRemoveCommand(), "remove", "member remove"),
		},
	}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printCluster prints the members as an aligned table, then the state.
func printCluster(w io.Writer, r rpc.ClusterResponse) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRAFT ADDR\tAPI ADDR\tROLE\tSTATE\tTERM\tLAST\tCOMMIT\tAPPLIED\tCONTACT\tVERSION")
	for _, m := range r.Members {
		state := m.State
		if m.Error != "" {
			state = "unreachable"
		}
		if m.Leader {
			state += " *"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", m.ID, m.RaftAddr, orDash(m.APIAddr), role(m.Suffrage),
			state, m.Term, m.LastIndex, m.CommitIndex, m.AppliedIndex, orDash(m.LastContact), memberVersion(m))
	}
	tw.Flush()
	for _, m := range r.Members {
		if m.Error != "" {
			fmt.Fprintf(w, "  %s: %s\n", m.ID, m.Error)
		}
	}
	s := r.FSM
	fmt.Fprintln(w)
	fmt.Fprintf(w, "protocol:  level %d%s\n", r.ClusterProtocol, upgradeNote(r))
	if !s.HasDataset {
		fmt.Fprintln(w, "dataset:   none set")
	} else {
		fmt.Fprintf(w, "dataset:   %d chunks in %d tasks (%d chunks/task, timeout %v, failure max %d%s)\n",
			s.Chunks, s.Tasks, s.Params.ChunksPerTask, s.Params.TaskTimeout, s.Params.FailureMax, strictNote(s.Params.Strict))
		fmt.Fprintf(w, "order:     %s\n", orderText(s.Params))
		fmt.Fprintf(w, "pass %d:    todo %d, pending %d, done %d, failed %d\n", s.Pass, s.Todo, s.Pending, s.Done, s.Failed)
	}
	if s.SaveHolder != "" {
		fmt.Fprintf(w, "save lease: held by %s until %s\n", s.SaveHolder, s.SaveDeadline.Format(time.RFC3339))
	} else {
		fmt.Fprintln(w, "save lease: free")
	}
	fmt.Fprintf(w, "groups:    %d\n", len(r.Groups))
	if len(r.Groups) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  GROUP\tSTATUS\tMEMBERS\tPEERS")
		for _, g := range r.Groups {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\n", g.ID, g.Status, len(g.Members), g.NumPeers)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "applied:   index %d, FSM clock %s\n", s.AppliedIndex, s.Clock.Format(time.RFC3339Nano))
	if len(r.Jobs) > 0 {
		fmt.Fprintf(w, "\njobs:      %d (state about %s); the lines above are the default job's\n", len(r.Jobs), humanBytes(s.StateBytes))
		printJobs(w, r.Jobs)
	}
}

// memberVersion is a member's release and the protocol level its build
// applies, as "v1.5.0 (level 2)".
func memberVersion(m rpc.Member) string {
	switch {
	case m.Version == "":
		return "-"
	case m.Protocol == 0:
		return m.Version
	}
	return fmt.Sprintf("%s (level %d)", m.Version, m.Protocol)
}

// upgradeNote says, when a member's build applies a higher level than the
// cluster's, why the cluster has not risen to it.
func upgradeNote(r rpc.ClusterResponse) string {
	highest := uint64(0)
	for _, m := range r.Members {
		highest = max(highest, m.Protocol)
	}
	if highest <= r.ClusterProtocol {
		return ""
	}
	return fmt.Sprintf(" (members apply up to %d: the level rises once every member runs a release that knows it)", highest)
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

// orderText says in which order a dataset's passes are dispatched.
func orderText(p rpc.DatasetParams) string {
	switch {
	case p.Shuffle:
		return fmt.Sprintf("shuffled each pass, seed %d", p.Seed)
	case p.Seed != 0:
		return fmt.Sprintf("id order (seed %d)", p.Seed)
	}
	return "id order"
}

func strictNote(strict bool) string {
	if strict {
		return ", strict"
	}
	return ""
}
