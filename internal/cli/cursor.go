package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/urfave/cli/v2"
)

func cursorCommand() *cli.Command {
	return &cli.Command{
		Name:  "cursor",
		Usage: "list, inspect, restore and delete the data positions saved with a job's model checkpoints",
		Description: "A cursor is a point in a job's dispatch, committed by a trainer with a model checkpoint\n" +
			"(CommitCursor in the Go client): the pass, the tasks finished in it and how many records of\n" +
			"each task in flight the training loop had consumed. Restoring it puts the job's dispatch\n" +
			"back there, so that the records trained from then on are exactly those the checkpoint had\n" +
			"not trained, at any number of trainers. A job keeps its 16 newest cursors, dropping the\n" +
			"oldest. The cluster must be at protocol level 7.",
		Subcommands: []*cli.Command{
			{
				Name:      "list",
				Usage:     "one line per cursor of the job, oldest first, and the job's restore generation",
				UsageText: "raftmaster cursor list --addr 127.0.0.1:8001 --job JOB [--json | -o json]",
				Flags:     clientFlags(append([]cli.Flag{jobFlag()}, outputFlags()...)...),
				Action: func(c *cli.Context) error {
					if c.NArg() != 0 {
						return fmt.Errorf("cursor list takes no argument; name the job with --job")
					}
					asJSON, err := wantJSON(c)
					if err != nil {
						return err
					}
					return withClient(c, func(cl *client.Client) error {
						resp, err := cl.Cursors(c.Context)
						if err != nil {
							return err
						}
						if asJSON {
							return printJSON(c.App.Writer, resp)
						}
						printCursors(c.App.Writer, resp.Cursors)
						fmt.Fprintf(c.App.Writer, "\n%d cursors of job %s; restore generation %d\n", len(resp.Cursors), resp.Job, resp.Generation)
						return nil
					})
				},
			},
			{
				Name:      "inspect",
				Usage:     "describe one cursor of the job, with its partly consumed tasks",
				UsageText: "raftmaster cursor inspect --addr 127.0.0.1:8001 --job JOB ID [--json | -o json]",
				Flags:     clientFlags(append([]cli.Flag{jobFlag()}, outputFlags()...)...),
				Action: func(c *cli.Context) error {
					id, err := oneCursor(c)
					if err != nil {
						return err
					}
					asJSON, err := wantJSON(c)
					if err != nil {
						return err
					}
					return withClient(c, func(cl *client.Client) error {
						resp, err := cl.Cursor(c.Context, id)
						if err != nil {
							return cursorError(err, id, c.String("job"))
						}
						if asJSON {
							return printJSON(c.App.Writer, resp)
						}
						printCursor(c.App.Writer, resp)
						return nil
					})
				},
			},
			{
				Name:      "restore",
				Usage:     "put the job's dispatch back to a cursor (stop the job's trainers first)",
				UsageText: "raftmaster cursor restore --addr 127.0.0.1:8001 --job JOB ID",
				Description: "Puts the job's dispatch back to cursor ID, in one entry: the job is at the cursor's pass,\n" +
					"the tasks it counts finished are finished, each task it counts partly consumed is dispatched\n" +
					"again from its first record not consumed, and every other task of the pass is to do. Every\n" +
					"lease of the job is revoked, so that trainers still running change nothing any more, and the\n" +
					"job's restore generation grows. Load the model checkpoint saved with the cursor, and start\n" +
					"the trainers at the pass this prints.",
				Flags: clientFlags(jobFlag()),
				Action: func(c *cli.Context) error {
					id, err := oneCursor(c)
					if err != nil {
						return err
					}
					return withClient(c, func(cl *client.Client) error {
						resp, err := cl.RestoreCursor(c.Context, id)
						if err != nil {
							return cursorError(err, id, c.String("job"))
						}
						cur := resp.Cursor
						fmt.Fprintf(c.App.Writer, "job %s restored to cursor %d (step %d): pass %d, %d of %d tasks finished, %d partly consumed; "+
							"%d leases revoked; restore generation %d\n",
							c.String("job"), cur.ID, cur.Step, cur.Pass, cur.Finished, cur.Tasks, cur.InFlight, resp.Revoked, resp.Generation)
						return nil
					})
				},
			},
			{
				Name:      "delete",
				Usage:     "delete a cursor of the job",
				UsageText: "raftmaster cursor delete --addr 127.0.0.1:8001 --job JOB ID",
				Flags:     clientFlags(jobFlag()),
				Action: func(c *cli.Context) error {
					id, err := oneCursor(c)
					if err != nil {
						return err
					}
					return withClient(c, func(cl *client.Client) error {
						deleted, err := cl.DeleteCursor(c.Context, id)
						if err != nil {
							return err
						}
						if deleted {
							fmt.Fprintf(c.App.Writer, "cursor %d of job %s deleted\n", id, c.String("job"))
						} else {
							fmt.Fprintf(c.App.Writer, "job %s had no cursor %d; nothing changed\n", c.String("job"), id)
						}
						return nil
					})
				},
			},
		},
	}
}

// oneCursor returns the ID argument of a cursor subcommand.
func oneCursor(c *cli.Context) (uint64, error) {
	if c.NArg() != 1 {
		return 0, fmt.Errorf("give one cursor ID (see raftmaster cursor list --job %s)", c.String("job"))
	}
	id, err := strconv.ParseUint(c.Args().First(), 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("cursor ID %q: want a positive integer (see raftmaster cursor list --job %s)", c.Args().First(), c.String("job"))
	}
	return id, nil
}

// cursorError names the job and the way to its cursors when err says it
// has no cursor id.
func cursorError(err error, id uint64, job string) error {
	if errors.Is(err, client.ErrUnknownCursor) {
		return fmt.Errorf("job %s has no cursor %d (see raftmaster cursor list --job %s): %w", job, id, job, err)
	}
	return err
}

// printCursors prints a line per cursor.
func printCursors(w io.Writer, cursors []rpc.CursorInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTEP\tPASS\tFINISHED\tIN FLIGHT\tRECORDS\tGENERATION\tSIZE\tCREATED")
	for _, cur := range cursors {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d/%d\t%d\t%d\t%d\t%s\t%s\n", cur.ID, cur.Step, cur.Pass, cur.Finished, cur.Tasks, cur.InFlight,
			cur.Records, cur.Generation, humanBytes(cur.Bytes), fsmTimeText(cur.CreatedAt))
	}
	tw.Flush()
}

// printCursor prints one cursor and its partly consumed tasks.
func printCursor(w io.Writer, r rpc.CursorResponse) {
	cur := r.Cursor
	fmt.Fprintf(w, "cursor:     %d of job %s\n", cur.ID, r.Job)
	fmt.Fprintf(w, "step:       %d\n", cur.Step)
	fmt.Fprintf(w, "created:    %s\n", fsmTimeText(cur.CreatedAt))
	fmt.Fprintf(w, "pass:       %d\n", cur.Pass)
	fmt.Fprintf(w, "tasks:      %d finished, %d partly consumed, of %d\n", cur.Finished, cur.InFlight, cur.Tasks)
	fmt.Fprintf(w, "records:    %d consumed in the pass\n", cur.Records)
	fmt.Fprintf(w, "generation: %d\n", cur.Generation)
	fmt.Fprintf(w, "size:       about %s\n", humanBytes(cur.Bytes))
	if len(r.Tasks) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tCONSUMED")
	for _, t := range r.Tasks {
		fmt.Fprintf(tw, "%d\t%d\n", t.Task, t.Consumed)
	}
	tw.Flush()
}
