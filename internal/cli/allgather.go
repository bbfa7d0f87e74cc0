package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/client"
	"github.com/urfave/cli/v2"
)

func allgatherCommand() *cli.Command {
	return &cli.Command{
		Name:  "allgather",
		Usage: "join or leave an allgather group (for scripts and debugging)",
		Subcommands: []*cli.Command{
			{
				Name:  "join",
				Usage: "join GROUP with DATA (a JSON value) and print every member's data once the group is complete",
				UsageText: "raftmaster allgather join --addr 127.0.0.1:8001 --group G --num-peers N [--member UUID] [--timeout 10m] [--fail-on-timeout] DATA\n" +
					"raftmaster allgather join --group rendezvous --num-peers 2 '{\"host\":\"10.0.0.1\",\"port\":29500}'",
				Description: "Prints a JSON array with the members' data in join order (a member's index is its\n" +
					"rank), followed by nothing else. When the group is still incomplete after --timeout, a\n" +
					"warning goes to stderr and the wait goes on, as in the original; with --fail-on-timeout the\n" +
					"group fails instead. Exits non-zero if the group fails, the member is replaced by a\n" +
					"later join with the same id, or it leaves.",
				Flags: clientFlags(jobFlag(),
					&cli.StringFlag{Name: "group", Usage: "group id", Required: true},
					&cli.IntFlag{Name: "num-peers", Usage: "members the group waits for", Required: true},
					&cli.StringFlag{Name: "member", Usage: "member UUID (default: a new one, printed on stderr)"},
					&cli.DurationFlag{Name: "timeout", Usage: "when to warn that the group is late (set by the join that creates the group)", Value: client.DefaultTimeout},
					&cli.BoolFlag{Name: "fail-on-timeout", Usage: "make --timeout a hard deadline that fails the group (set by the join that creates it)"},
				),
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return fmt.Errorf("want exactly one DATA argument (a JSON value), got %d", c.NArg())
					}
					var data any
					if err := json.Unmarshal([]byte(c.Args().First()), &data); err != nil {
						return fmt.Errorf("DATA is not JSON: %w", err)
					}
					member, err := memberID(c)
					if err != nil {
						return err
					}
					return withClient(c, func(cl *client.Client) error {
						fmt.Fprintf(c.App.ErrWriter, "joining %s as %s, waiting for %d members\n", c.String("group"), member, c.Int("num-peers"))
						join := cl.JoinWithTimeout
						if c.Bool("fail-on-timeout") {
							join = cl.JoinWithDeadline
						}
						late := func(err error) {
							fmt.Fprintf(c.App.ErrWriter, "group %s is late: %v; still waiting\n", c.String("group"), err)
						}
						if c.Bool("fail-on-timeout") {
							late = nil
						}
						w, err := join(c.String("group"), member, c.Int("num-peers"), data, nil, late, c.Duration("timeout"))
						if err != nil {
							return err
						}
						res := <-w.C
						if res.Err != nil {
							return res.Err
						}
						return printJSON(c.App.Writer, res.Data)
					})
				},
			},
			{
				Name:      "leave",
				Usage:     "remove a member from a group",
				UsageText: "raftmaster allgather leave --addr 127.0.0.1:8001 --group G --member UUID",
				Flags: clientFlags(jobFlag(),
					&cli.StringFlag{Name: "group", Usage: "group id", Required: true},
					&cli.StringFlag{Name: "member", Usage: "member UUID", Required: true},
				),
				Action: func(c *cli.Context) error {
					member, err := memberID(c)
					if err != nil {
						return err
					}
					return withClient(c, func(cl *client.Client) error {
						return cl.Leave(c.String("group"), member)
					})
				},
			},
		},
	}
}

func memberID(c *cli.Context) (uuid.UUID, error) {
	s := c.String("member")
	if s == "" {
		return uuid.New(), nil
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, fmt.Errorf("--member %q: %w", s, err)
	}
	return id, nil
}

func healthCommand() *cli.Command {
	return &cli.Command{
		Name:  "health",
		Usage: "exit 0 when the node at --addr is ready (has a leader and has caught up), for probes",
		UsageText: "raftmaster health --addr 127.0.0.1:8001 [--wait 30s] [--json | -o json]\n\n" +
			"With --wait, keeps asking until the node is ready or the time is up.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "addr", Usage: "API address of the node to check", Value: "127.0.0.1:8001", EnvVars: env("addr")},
			&cli.DurationFlag{Name: "wait", Usage: "keep trying this long"},
		}, outputFlags()...),
		Action: func(c *cli.Context) error {
			asJSON, err := wantJSON(c)
			if err != nil {
				return err
			}
			report := func(ready bool, err error) error {
				if !asJSON {
					return nil
				}
				h := healthAnswer{Addr: c.String("addr"), Ready: ready}
				if err != nil {
					h.Error = err.Error()
				}
				return printJSON(c.App.Writer, h)
			}
			cl, err := newClient(c, client.WithRetry(time.Second))
			if err != nil {
				return err
			}
			defer cl.Close()
			deadline := time.Now().Add(c.Duration("wait"))
			for {
				err := cl.Health(c.Context)
				if err == nil {
					if asJSON {
						return report(true, nil)
					}
					fmt.Fprintf(c.App.Writer, "%s: ready\n", c.String("addr"))
					return nil
				}
				if time.Now().After(deadline) {
					if jerr := report(false, err); jerr != nil {
						return jerr
					}
					return cli.Exit(fmt.Sprintf("%s: not ready: %v", c.String("addr"), err), 1)
				}
				time.Sleep(200 * time.Millisecond)
			}
		},
	}
}

// healthAnswer is what health prints with --json.
type healthAnswer struct {
	Addr  string `json:"addr"`
	Ready bool   `json:"ready"`
	Error string `json:"error,omitempty"`
}
