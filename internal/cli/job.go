package cli

import (
	"fmt"
	"io"
	"path"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/urfave/cli/v2"
)

func jobCommand() *cli.Command {
	return &cli.Command{
		Name:  "job",
		Usage: "list, inspect, create and delete the jobs that share the cluster; change a mixture's weights",
		Description: "Every job has its own dataset, passes, save-model lease and allgather groups.\n" +
			"Trainers pick theirs with --job (client.WithJob in Go); those that name none use the\n" +
			"job named default. A job is created by its first dataset, join or save-model request.",
		Subcommands: []*cli.Command{
			{
				Name:      "list",
				Usage:     "one line per job, with the limits in effect",
				UsageText: "raftmaster job list --addr 127.0.0.1:8001 [--json]",
				Flags:     clientFlags(outputFlags()...),
				Action: func(c *cli.Context) error {
					asJSON, err := wantJSON(c)
					if err != nil {
						return err
					}
					return withClient(c, func(cl *client.Client) error {
						resp, err := cl.Jobs()
						if err != nil {
							return err
						}
						if asJSON {
							return printJSON(c.App.Writer, resp)
						}
						printJobs(c.App.Writer, resp.Jobs)
						l := resp.Limits
						ttl := "off"
						if l.JobTTL > 0 {
							ttl = time.Duration(l.JobTTL).String()
						}
						fmt.Fprintf(c.App.Writer, "\n%d jobs (at most %d); state about %s of %s; idle jobs collected after: %s\n",
							len(resp.Jobs), l.MaxJobs, humanBytes(resp.StateBytes), humanBytes(l.MaxStateBytes), ttl)
						return nil
					})
				},
			},
			{
				Name:      "inspect",
				Usage:     "describe one job",
				UsageText: "raftmaster job inspect --addr 127.0.0.1:8001 JOB [--files] [--json | -o json]",
				Description: "Shows the job's dataset (the patterns it was set with, its files, chunks, tasks\n" +
					"and settings), its pass, its save-model lease, groups and register. A mixture\n" +
					"(dataset set --source) shows a line per source: its weight and share of the\n" +
					"records, its own pass, its tasks by queue, the records and tasks it has finished\n" +
					"in every pass; then the weight schedule's steps to come. The files are\n" +
					"summarised per directory;\n" +
					"--files lists them (the first " + fmt.Sprint(rpc.MaxJobPaths) + ", in the order of the dataset).",
				Flags: clientFlags(append(outputFlags(),
					&cli.BoolFlag{Name: "files", Usage: "list the dataset's files one per line"})...),
				Action: func(c *cli.Context) error {
					name, err := oneJob(c)
					if err != nil {
						return err
					}
					asJSON, err := wantJSON(c)
					if err != nil {
						return err
					}
					return withClient(c, func(cl *client.Client) error {
						j, err := cl.Job(name)
						if err != nil {
							return err
						}
						if asJSON {
							return printJSON(c.App.Writer, j)
						}
						printJob(c.App.Writer, j, c.Bool("files"))
						return nil
					})
				},
			},
			{
				Name:      "create",
				Usage:     "create an empty job (its first dataset, join or save-model request also does)",
				UsageText: "raftmaster job create --addr 127.0.0.1:8001 JOB",
				Flags:     clientFlags(),
				Action: func(c *cli.Context) error {
					name, err := oneJob(c)
					if err != nil {
						return err
					}
					return withClient(c, func(cl *client.Client) error {
						created, err := cl.CreateJob(name)
						if err != nil {
							return err
						}
						if created {
							fmt.Fprintf(c.App.Writer, "job %s created\n", name)
						} else {
							fmt.Fprintf(c.App.Writer, "job %s exists already; nothing changed\n", name)
						}
						return nil
					})
				},
			},
			{
				Name:      "delete",
				Usage:     "delete a job with its dataset, tasks, leases and groups; its name can then start afresh",
				UsageText: "raftmaster job delete --addr 127.0.0.1:8001 JOB",
				Flags:     clientFlags(),
				Action: func(c *cli.Context) error {
					name, err := oneJob(c)
					if err != nil {
						return err
					}
					return withClient(c, func(cl *client.Client) error {
						if err := cl.DeleteJob(name); err != nil {
							return err
						}
						fmt.Fprintf(c.App.Writer, "job %s deleted\n", name)
						return nil
					})
				},
			},
			weightsCommand(),
		},
	}
}

// oneJob returns the JOB argument of a job subcommand.
func oneJob(c *cli.Context) (string, error) {
	if c.NArg() != 1 {
		return "", fmt.Errorf("give one JOB (see raftmaster job list)")
	}
	return c.Args().First(), nil
}

// printJobs prints a line per job.
func printJobs(w io.Writer, jobs []rpc.Job) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tDATASET\tPASS\tTODO\tPENDING\tDONE\tFAILED\tGROUPS\tSAVE LEASE\tSIZE\tLAST USED")
	for _, j := range jobs {
		dataset := "-"
		if j.HasDataset {
			dataset = fmt.Sprintf("%d files, %d tasks", j.Files, j.Tasks)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", j.Name, dataset, j.Pass, j.Todo, j.Pending, j.Done, j.Failed,
			j.Groups, orDash(j.SaveHolder), humanBytes(j.Bytes), fsmTimeText(j.LastActivity))
	}
	tw.Flush()
}

// printJob prints one job's summary; with allFiles, every path the answer
// holds, else the files per directory.
func printJob(w io.Writer, j rpc.Job, allFiles bool) {
	fmt.Fprintf(w, "job:        %s\n", j.Name)
	fmt.Fprintf(w, "created:    %s\n", fsmTimeText(j.CreatedAt))
	fmt.Fprintf(w, "last used:  %s\n", fsmTimeText(j.LastActivity))
	if j.HasDataset {
		fmt.Fprintf(w, "dataset:    %d files, %d chunks in %d tasks", j.Files, j.Chunks, j.Tasks)
		if p := j.Params; p != nil {
			fmt.Fprintf(w, " (%d chunks/task, timeout %v, failure max %d%s)", p.ChunksPerTask, p.TaskTimeout, p.FailureMax, strictNote(p.Strict))
		}
		fmt.Fprintln(w)
		if p := j.Params; p != nil {
			fmt.Fprintf(w, "order:      %s\n", orderText(*p))
		}
		fmt.Fprintf(w, "pass %d:     todo %d, pending %d, done %d, failed %d\n", j.Pass, j.Todo, j.Pending, j.Done, j.Failed)
		if len(j.Sources) > 0 {
			printMixture(w, j.Sources, j.Schedule, j.Records)
			printSourcePatterns(w, j.Sources)
		} else {
			printPatterns(w, j.Patterns)
		}
		printFiles(w, j, allFiles)
	} else {
		fmt.Fprintln(w, "dataset:    none set")
	}
	if j.SaveHolder != "" {
		fmt.Fprintf(w, "save lease: held by %s until %s\n", j.SaveHolder, fsmTimeText(j.SaveDeadline))
	} else {
		fmt.Fprintln(w, "save lease: free")
	}
	fmt.Fprintf(w, "groups:     %d\n", j.Groups)
	fmt.Fprintf(w, "register:   %d keys\n", j.KVKeys)
	fmt.Fprintf(w, "size:       about %s\n", humanBytes(j.Bytes))
	if !j.CollectAt.IsZero() {
		fmt.Fprintf(w, "collected:  at %s unless used before\n", fsmTimeText(j.CollectAt))
	}
}

// printPatterns prints the globs the dataset was set with, one a line, or
// says why there are none.
func printPatterns(w io.Writer, patterns []string) {
	if len(patterns) == 0 {
		fmt.Fprintln(w, "patterns:   unknown (the dataset was given as chunks, or set before the cluster reached protocol level 4)")
		return
	}
	for i, p := range patterns {
		label := ""
		if i == 0 {
			label = "patterns:"
		}
		fmt.Fprintf(w, "%-11s %s\n", label, p)
	}
}

// fsmTimeText formats an FSM time, "-" for none.
func fsmTimeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339)
}

// printFiles prints the dataset's files: every path, or a line per
// directory with how many files it holds and the first and last names.
func printFiles(w io.Writer, j rpc.Job, all bool) {
	more := ""
	if n := j.Files - len(j.Paths); n > 0 {
		more = fmt.Sprintf(" (and %d more files)", n)
	}
	if all {
		for i, p := range j.Paths {
			label := ""
			if i == 0 {
				label = "files:"
			}
			fmt.Fprintf(w, "%-11s %s\n", label, p)
		}
		if more != "" {
			fmt.Fprintf(w, "%-11s %s\n", "", strings.TrimSpace(more))
		}
		return
	}
	type dir struct {
		name        string
		n           int
		first, last string
	}
	var dirs []*dir
	byName := map[string]*dir{}
	for _, p := range j.Paths {
		name, base := path.Split(p)
		d := byName[name]
		if d == nil {
			d = &dir{name: name, first: base}
			byName[name] = d
			dirs = append(dirs, d)
		}
		d.n++
		d.last = base
	}
	for i, d := range dirs {
		label := ""
		if i == 0 {
			label = "files:"
		}
		switch d.n {
		case 1:
			fmt.Fprintf(w, "%-11s %s%s\n", label, d.name, d.first)
		default:
			fmt.Fprintf(w, "%-11s %d in %s: %s ... %s\n", label, d.n, orDash(d.name), d.first, d.last)
		}
	}
	if more != "" {
		fmt.Fprintf(w, "%-11s %s\n", "", strings.TrimSpace(more))
	}
}
