package cli

import (
	"encoding/json"
	"errors"
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
		Usage: "inspect the cluster and change its membership",
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
			{
				Name:  "join",
				Usage: "add a started node to the cluster",
				UsageText: "raftmaster cluster join --addr 127.0.0.1:8001 --id n4 --raft-addr 127.0.0.1:7004 --api-addr 127.0.0.1:8004\n\n" +
					"The node must be running (raftmaster serve without --peers). A node started with\n" +
					"serve --join does this by itself. A node with an empty data directory is a new\n" +
					"incarnation: it is added as a non-voter, and becomes a voter by itself once it has\n" +
					"caught up.",
				Flags: clientFlags(
					&cli.StringFlag{Name: "id", Usage: "the new node's name, or its server id (NAME~INCARNATION, as its status says)", Required: true},
					&cli.StringFlag{Name: "raft-addr", Usage: "its Raft address", Required: true},
					&cli.StringFlag{Name: "api-addr", Usage: "its API address", Required: true},
				),
				Action: func(c *cli.Context) error {
					// The node's own status gives its server id and level.
					node, err := newClientAt(c, []string{c.String("api-addr")})
					if err != nil {
						return err
					}
					st, err := node.StatusStale()
					node.Close()
					if err != nil {
						return fmt.Errorf("asking the node at %s for its server id: %w", c.String("api-addr"), err)
					}
					if id := c.String("id"); st.NodeID != id && st.Name != id && (st.Name != "" || raftnode.NameOf(st.NodeID) != id) {
						return fmt.Errorf("the node at %s is %s, not %q", c.String("api-addr"), st.NodeID, id)
					}
					req := rpc.AddVoterRequest{ID: st.NodeID, RaftAddr: c.String("raft-addr"), APIAddr: c.String("api-addr"),
						Protocol: st.Protocol, Version: st.Version, LastIndex: st.LastIndex}
					return withClient(c, func(cl *client.Client) error {
						if err := cl.AddServer(req); err != nil {
							return err
						}
						fmt.Fprintf(c.App.Writer, "added %s (raft %s, api %s)\n", req.ID, req.RaftAddr, req.APIAddr)
						return nil
					})
				},
			},
			{
				Name:      "remove",
				Usage:     "remove a node from the cluster, by its name or its server id (NAME~INCARNATION)",
				UsageText: "raftmaster cluster remove --addr 127.0.0.1:8001 NODE",
				Flags:     clientFlags(),
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return fmt.Errorf("want exactly one node id, got %d arguments", c.NArg())
					}
					return withClient(c, func(cl *client.Client) error {
						if err := cl.RemoveNode(c.Args().First()); err != nil {
							var re *rpc.Error
							if errors.As(err, &re) && re.Code == rpc.CodeNotFound {
								return fmt.Errorf("%q is not a member of the cluster (\"raftmaster cluster inspect\" lists them): %s", c.Args().First(), re.Message)
							}
							return err
						}
						fmt.Fprintf(c.App.Writer, "removed %s\n", c.Args().First())
						return nil
					})
				},
			},
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
	fmt.Fprintln(tw, "ID\tRAFT ADDR\tAPI ADDR\tSUFFRAGE\tSTATE\tTERM\tLAST\tCOMMIT\tAPPLIED\tCONTACT\tVERSION")
	for _, m := range r.Members {
		state := m.State
		if m.Error != "" {
			state = "unreachable"
		}
		if m.Leader {
			state += " *"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", m.ID, m.RaftAddr, orDash(m.APIAddr), m.Suffrage,
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

func strictNote(strict bool) string {
	if strict {
		return ", strict"
	}
	return ""
}
