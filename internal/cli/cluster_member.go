package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/raftnode"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/urfave/cli/v2"
)

// memberRow is one member as member list prints it.
type memberRow struct {
	// ID is the server id, NAME~INCARNATION (or the name alone, for a data
	// directory of an earlier release); Name the node's name.
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// Role is voter or nonvoter (master on the etcd backend).
	Role     string `json:"role"`
	RaftAddr string `json:"raft_addr,omitempty"`
	APIAddr  string `json:"api_addr,omitempty"`
	Leader   bool   `json:"leader"`
}

// memberList is what member list prints with --json.
type memberList struct {
	Leader  rpc.NodeRef `json:"leader"`
	Members []memberRow `json:"members"`
}

func clusterMemberCommand() *cli.Command {
	return &cli.Command{
		Name:  "member",
		Usage: "list, add and remove the members of the cluster",
		Description: "A member is a node of the cluster's Raft configuration. Its role is voter (it votes\n" +
			"and counts towards the quorum) or non-voter (it receives the log and votes for no one):\n" +
			"a node that comes back with an empty data directory is added as a non-voter and\n" +
			"becomes a voter by itself once it has caught up.\n\n" +
			"\"raftmaster cluster join\" and \"raftmaster cluster remove\" are the earlier names of\n" +
			"member add and member remove, and still work.",
		Subcommands: []*cli.Command{memberListCommand(), memberAddCommand(), memberRemoveCommand()},
	}
}

func memberListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the members with their role, addresses and which one leads",
		UsageText: "raftmaster cluster member list --addr 127.0.0.1:8001 [--stale] [--json | -o json]\n\n" +
			"The leader answers, unless --stale: then any node of --addr answers from its own view\n" +
			"of the configuration, which may lag behind the leader's, and answers while the\n" +
			"cluster has no leader.",
		Flags: append(clientFlags(
			&cli.BoolFlag{Name: "stale", Usage: "let any node answer from its own view of the configuration"},
		), outputFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return fmt.Errorf("member list takes no arguments, got %q", c.Args().First())
			}
			asJSON, err := wantJSON(c)
			if err != nil {
				return err
			}
			return withClient(c, func(cl *client.Client) error {
				members := cl.Members
				if c.Bool("stale") {
					members = cl.MembersStale
				}
				resp, err := members()
				if err != nil {
					return err
				}
				list := listMembers(resp)
				if asJSON {
					return printJSON(c.App.Writer, list)
				}
				printMemberList(c.App.Writer, list)
				return nil
			})
		},
	}
}

// listMembers is the member list of a cluster answer.
func listMembers(r rpc.ClusterResponse) memberList {
	out := memberList{Leader: r.Leader, Members: make([]memberRow, 0, len(r.Members))}
	for _, m := range r.Members {
		out.Members = append(out.Members, memberRow{ID: m.ID, Name: m.Name, Role: role(m.Suffrage),
			RaftAddr: m.RaftAddr, APIAddr: m.APIAddr, Leader: m.Leader})
	}
	return out
}

// printMemberList prints a row per member, the leader marked with *.
func printMemberList(w io.Writer, l memberList) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tROLE\tRAFT ADDR\tAPI ADDR\tLEADER")
	for _, m := range l.Members {
		leader := ""
		if m.Leader {
			leader = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, orDash(m.Name), m.Role, orDash(m.RaftAddr), orDash(m.APIAddr), leader)
	}
	tw.Flush()
}

func memberAddCommand() *cli.Command {
	return &cli.Command{
		Name:  "add",
		Usage: "add a started node to the cluster as a member",
		UsageText: "raftmaster cluster member add --addr 127.0.0.1:8001 --id n4 --raft-addr 127.0.0.1:7004 --api-addr 127.0.0.1:8004\n\n" +
			"The node must be running (raftmaster serve without --peers). A node started with\n" +
			"serve --members does this by itself. A node with an empty data directory is a new\n" +
			"incarnation: it is added as a non-voter, and becomes a voter by itself once it has\n" +
			"caught up.",
		Flags: clientFlags(
			&cli.StringFlag{Name: "id", Usage: "the new member's name, or its server id (NAME~INCARNATION, as its status says)", Required: true},
			&cli.StringFlag{Name: "raft-addr", Usage: "its Raft address", Required: true},
			&cli.StringFlag{Name: "api-addr", Usage: "its API address", Required: true},
		),
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return fmt.Errorf("member add takes flags only, not %q", c.Args().First())
			}
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
			req := rpc.AddMemberRequest{ID: st.NodeID, RaftAddr: c.String("raft-addr"), APIAddr: c.String("api-addr"),
				Protocol: st.Protocol, Version: st.Version, LastIndex: st.LastIndex}
			return withClient(c, func(cl *client.Client) error {
				if err := cl.AddMember(req); err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "added %s (raft %s, api %s)\n", req.ID, req.RaftAddr, req.APIAddr)
				return nil
			})
		},
	}
}

func memberRemoveCommand() *cli.Command {
	return &cli.Command{
		Name:      "remove",
		Usage:     "remove a member from the cluster, by its name or its server id (NAME~INCARNATION)",
		UsageText: "raftmaster cluster member remove --addr 127.0.0.1:8001 NODE",
		Flags:     clientFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("want exactly one member, by name or server id, got %d arguments", c.NArg())
			}
			return withClient(c, func(cl *client.Client) error {
				if err := cl.RemoveMember(c.Args().First()); err != nil {
					if re, ok := errors.AsType[*rpc.Error](err); ok && re.Code == rpc.CodeNotFound {
						return fmt.Errorf("%q is not a member of the cluster (\"raftmaster cluster member list\" lists them): %s", c.Args().First(), re.Message)
					}
					return err
				}
				fmt.Fprintf(c.App.Writer, "removed %s\n", c.Args().First())
				return nil
			})
		},
	}
}

// role is a member's role as the CLI prints it, from its Raft suffrage:
// voter or nonvoter.
func role(suffrage string) string { return strings.ToLower(suffrage) }

// earlierName returns cmd under the name it had before it went under
// "cluster member", hidden from the help and the completions.
func earlierName(cmd *cli.Command, name, now string) *cli.Command {
	cmd.Name, cmd.Hidden = name, true
	cmd.Usage = "the earlier name of cluster " + now + ": " + cmd.Usage
	return cmd
}
