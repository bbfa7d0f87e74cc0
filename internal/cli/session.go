package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/urfave/cli/v2"
)

func sessionCommand() *cli.Command {
	return &cli.Command{
		Name:  "session",
		Usage: "list and close the sessions of the trainers' client processes",
		Description: "A client process opens a session and keeps it alive; the Go and Python clients do so\n" +
			"on a cluster at protocol level 6. The tasks it leases under its session need no renewal,\n" +
			"and they, its save-model lease and the register keys it attaches to the session are\n" +
			"released in one entry when the session is closed, or when the leader has had no keep-alive\n" +
			"for its TTL (serve --session-ttl, 5s unless set): a dead trainer's tasks come back within\n" +
			"seconds. A session's tasks also come back when its client reports no progress on them for\n" +
			"the job's task timeout.\n\n" +
			"On a cluster that requires tokens, session list needs an operator token; a token closes\n" +
			"the sessions it opened, an operator token any.",
		Subcommands: []*cli.Command{
			{
				Name:      "list",
				Usage:     "one line per open session: its TTL, the time it has left, its age, the tasks it holds and its keys",
				UsageText: "raftmaster session list --addr 127.0.0.1:8001 [--json | -o json]",
				Flags:     clientFlags(outputFlags()...),
				Action: func(c *cli.Context) error {
					asJSON, err := wantJSON(c)
					if err != nil {
						return err
					}
					return withClient(c, func(cl *client.Client) error {
						resp, err := cl.SessionsContext(c.Context)
						if err != nil {
							return err
						}
						if asJSON {
							return printJSON(c.App.Writer, resp)
						}
						printSessions(c.App.Writer, resp.Sessions)
						return nil
					})
				},
			},
			{
				Name: "close",
				Usage: "close a session: the tasks it holds go back to the queue without counting a failure, " +
					"the keys attached to it are deleted and its save-model lease is released",
				UsageText: "raftmaster session close --addr 127.0.0.1:8001 ID",
				Description: "Closes the session ID (see raftmaster session list). Its client's next request under it\n" +
					"is refused as expired, and the client carries on under a new session.",
				Flags: clientFlags(),
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return fmt.Errorf("give one session ID (see raftmaster session list)")
					}
					id, err := strconv.ParseUint(c.Args().First(), 10, 64)
					if err != nil || id == 0 {
						return fmt.Errorf("session ID %q: want a positive integer (see raftmaster session list)", c.Args().First())
					}
					return withClient(c, func(cl *client.Client) error {
						closed, err := cl.CloseSessionContext(c.Context, id)
						if err != nil {
							return err
						}
						if closed {
							fmt.Fprintf(c.App.Writer, "session %d closed\n", id)
						} else {
							fmt.Fprintf(c.App.Writer, "session %d had ended already; nothing changed\n", id)
						}
						return nil
					})
				},
			},
		},
	}
}

// maxSessionTasksShown is how many of a session's tasks its line names.
const maxSessionTasksShown = 3

// printSessions prints a line per session.
func printSessions(w io.Writer, sessions []rpc.Session) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTTL\tREMAINING\tAGE\tTASKS\tKEYS")
	for _, s := range sessions {
		fmt.Fprintf(tw, "%d\t%v\t%v\t%v\t%s\t%d\n", s.Session, s.TTL, time.Duration(s.Remaining).Round(time.Millisecond),
			time.Duration(s.Age).Round(time.Second), sessionTasks(s.Tasks), s.Keys)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d sessions\n", len(sessions))
}

// sessionTasks names the first tasks a session holds, as JOB/TASK, after
// their count: "-" for none.
func sessionTasks(tasks []rpc.SessionTask) string {
	if len(tasks) == 0 {
		return "-"
	}
	var names []string
	for i, t := range tasks {
		if i == maxSessionTasksShown {
			names = append(names, "...")
			break
		}
		names = append(names, fmt.Sprintf("%s/%d", t.Job, t.Meta.ID))
	}
	return fmt.Sprintf("%d (%s)", len(tasks), strings.Join(names, ", "))
}
