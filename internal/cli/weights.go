package cli

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/urfave/cli/v2"
)

// weightsCommand is job weights: a mixture's weights, now or at a count
// of records consumed.
func weightsCommand() *cli.Command {
	return &cli.Command{
		Name:  "weights",
		Usage: "change the source weights of a job whose dataset is a mixture (dataset set --source)",
		Description: "A mixture hands out its sources' records in the proportion of their weights. A change\n" +
			"holds from the next task handed out, for every trainer at once; the mixture counts its\n" +
			"shares afresh from it and does not pay back the past. job inspect JOB shows the sources\n" +
			"with their weights, passes and records, and the schedule.",
		Subcommands: []*cli.Command{
			{
				Name:  "set",
				Usage: "set the weights of the sources named, now or, with --at, once the job has consumed RECORDS records",
				UsageText: "raftmaster job weights set --addr A JOB NAME=WEIGHT...\n" +
					"raftmaster job weights set --addr A --at RECORDS JOB NAME=WEIGHT...",
				Description: "Each NAME=WEIGHT sets the weight of source NAME (such as web=0.2); the sources not\n" +
					"named keep theirs. Weights are relative (0.2 and 0.8 mix as 1 and 4 do), at least\n" +
					"0 and at most 4000; a source of weight 0 is not read.\n\n" +
					"Without --at the weights change now. With --at RECORDS they go into the job's\n" +
					"schedule instead, as the step taken once the job's records consumed (the records\n" +
					"of its finished tasks, in every pass) reach RECORDS. A step already at RECORDS is\n" +
					"replaced, the other steps stay; a step the job has reached already takes effect at\n" +
					"once. The schedule is read and written back whole: a change another command makes\n" +
					"to it in between is lost. job weights schedule clear drops every step.\n\n" +
					"Examples:\n" +
					"   raftmaster job weights set --addr n1:8001 train web=0.2 code=0.8\n" +
					"   raftmaster job weights set --addr n1:8001 --at 1000000 train web=0.5 code=0.5",
				Flags: clientFlags(append(outputFlags(),
					&cli.Int64Flag{Name: "at", DefaultText: "none", Usage: "set a schedule step taken once the job has consumed `RECORDS` records, instead of changing the weights now"})...),
				Action: setWeightsAction,
			},
			{
				Name:  "schedule",
				Usage: "the steps of weights to come",
				Subcommands: []*cli.Command{{
					Name:      "clear",
					Usage:     "drop every step of the job's weight schedule; the weights in effect stay",
					UsageText: "raftmaster job weights schedule clear --addr A JOB",
					Flags:     clientFlags(outputFlags()...),
					Action: func(c *cli.Context) error {
						name, err := oneJob(c)
						if err != nil {
							return err
						}
						asJSON, err := wantJSON(c)
						if err != nil {
							return err
						}
						cl, err := newClient(c, client.WithJob(name))
						if err != nil {
							return err
						}
						defer cl.Close()
						resp, err := cl.SetWeightSchedule(c.Context, nil)
						if err != nil {
							return err
						}
						if asJSON {
							return printJSON(c.App.Writer, resp)
						}
						fmt.Fprintf(c.App.Writer, "job %s: weight schedule cleared\n", name)
						printMixture(c.App.Writer, resp.Sources, resp.Schedule, -1)
						return nil
					},
				}},
			},
		},
	}
}

// setWeightsAction is job weights set.
func setWeightsAction(c *cli.Context) error {
	if c.NArg() < 2 {
		return fmt.Errorf("give JOB, then NAME=WEIGHT for each source to change (such as: job weights set train web=0.2 code=0.8)")
	}
	name := c.Args().First()
	if strings.Contains(name, "=") {
		return fmt.Errorf("%q: the first argument is the JOB, then come the NAME=WEIGHT pairs", name)
	}
	weights, err := parseWeights(c.Args().Tail())
	if err != nil {
		return err
	}
	at := c.Int64("at")
	if c.IsSet("at") && at < 0 {
		return fmt.Errorf("--at %d: a count of records is at least 0", at)
	}
	asJSON, err := wantJSON(c)
	if err != nil {
		return err
	}
	cl, err := newClient(c, client.WithJob(name))
	if err != nil {
		return err
	}
	defer cl.Close()
	if !c.IsSet("at") {
		resp, err := cl.SetWeights(c.Context, weights)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(c.App.Writer, resp)
		}
		fmt.Fprintf(c.App.Writer, "job %s: weights set, from the next task: %s\n", name, weightsText(weights, resp.Sources))
		printMixture(c.App.Writer, resp.Sources, resp.Schedule, -1)
		return nil
	}
	j, err := cl.JobContext(c.Context, name)
	if err != nil {
		return err
	}
	if !j.HasDataset {
		return fmt.Errorf("job %s has no dataset yet: dataset set --source makes it a mixture", name)
	}
	if len(j.Sources) == 0 {
		return fmt.Errorf("job %s: its dataset is not a mixture of sources (dataset set --source makes one), so it has no weights", name)
	}
	step := rpc.WeightStep{AtRecords: at, Weights: weights}
	resp, err := cl.SetWeightSchedule(c.Context, scheduleWith(j.Schedule, step))
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(c.App.Writer, resp)
	}
	if !slices.ContainsFunc(resp.Schedule, func(s rpc.WeightStep) bool { return s.AtRecords == at }) {
		// The steps answered are those not yet reached.
		fmt.Fprintf(c.App.Writer, "job %s: the job has consumed %d records or more already, so the step took effect at once: %s\n",
			name, at, weightsText(weights, resp.Sources))
	} else {
		fmt.Fprintf(c.App.Writer, "job %s: at %d records (%d consumed so far): %s\n", name, at, j.Records, weightsText(weights, resp.Sources))
	}
	printMixture(c.App.Writer, resp.Sources, resp.Schedule, -1)
	return nil
}

// scheduleWith returns schedule with step in it, in order of AtRecords:
// in place of a step at the same count, else added.
func scheduleWith(schedule []rpc.WeightStep, step rpc.WeightStep) []rpc.WeightStep {
	out := slices.DeleteFunc(slices.Clone(schedule), func(s rpc.WeightStep) bool { return s.AtRecords == step.AtRecords })
	out = append(out, step)
	slices.SortFunc(out, func(a, b rpc.WeightStep) int { return cmp.Compare(a.AtRecords, b.AtRecords) })
	return out
}

// sourceFlag is the value of --source: every occurrence as given, not
// split at commas, which patterns may hold.
type sourceFlag []string

// Set adds one occurrence.
func (s *sourceFlag) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// String is the occurrences, space-separated.
func (s *sourceFlag) String() string {
	if s == nil {
		return ""
	}
	return strings.Join(*s, " ")
}

// sourceSpecs returns the --source flags given.
func sourceSpecs(c *cli.Context) []string {
	if s, ok := c.Generic("source").(*sourceFlag); ok && s != nil {
		return *s
	}
	return nil
}

// sourceSyntax is what a --source flag holds.
const sourceSyntax = "want NAME=WEIGHT:PATTERN, such as web=0.7:/data/web/*.recordio"

// parseSources reads the --source flags: NAME=WEIGHT:PATTERN each, a source
// of several patterns repeating its name with the same weight. The
// sources are in the order of their first flag.
func parseSources(specs []string) ([]client.Source, error) {
	var out []client.Source
	index := map[string]int{}
	for _, spec := range specs {
		name, rest, ok := strings.Cut(spec, "=")
		if !ok {
			return nil, fmt.Errorf("--source %q: no '=': %s", spec, sourceSyntax)
		}
		if name = strings.TrimSpace(name); name == "" {
			return nil, fmt.Errorf("--source %q: no NAME before '=': %s", spec, sourceSyntax)
		}
		text, pattern, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, fmt.Errorf("--source %q: no ':' between the weight and the pattern: %s", spec, sourceSyntax)
		}
		weight, err := parseWeight(text)
		if err != nil {
			return nil, fmt.Errorf("--source %q: %w", spec, err)
		}
		if pattern == "" {
			return nil, fmt.Errorf("--source %q: no PATTERN after ':': %s", spec, sourceSyntax)
		}
		if k, ok := index[name]; ok {
			if out[k].Weight != weight {
				return nil, fmt.Errorf("--source %q: source %s has weight %s already; repeat a source with the same weight to give it more patterns",
					spec, name, formatWeight(out[k].Weight))
			}
			if !slices.Contains(out[k].Patterns, pattern) {
				out[k].Patterns = append(out[k].Patterns, pattern)
			}
			continue
		}
		index[name] = len(out)
		out = append(out, client.Source{Name: name, Weight: weight, Patterns: []string{pattern}})
	}
	return out, nil
}

// parseWeights reads NAME=WEIGHT arguments, each source once.
func parseWeights(args []string) (map[string]float64, error) {
	out := make(map[string]float64, len(args))
	for _, a := range args {
		name, text, ok := strings.Cut(a, "=")
		if !ok {
			return nil, fmt.Errorf("%q: no '=': want NAME=WEIGHT, such as web=0.2", a)
		}
		if name = strings.TrimSpace(name); name == "" {
			return nil, fmt.Errorf("%q: no NAME before '=': want NAME=WEIGHT, such as web=0.2", a)
		}
		weight, err := parseWeight(text)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", a, err)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%q: source %s is given a weight twice", a, name)
		}
		out[name] = weight
	}
	return out, nil
}

// parseWeight reads a weight: a decimal number of at least 0.
func parseWeight(text string) (float64, error) {
	w, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil || math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
		return 0, fmt.Errorf("weight %q is not a number of at least 0 (such as 0.7 or 3)", text)
	}
	return w, nil
}

// formatWeight writes a weight as short as it reads back.
func formatWeight(w float64) string { return strconv.FormatFloat(w, 'f', -1, 64) }

// weightsText writes weights as NAME=WEIGHT pairs, in the order of sources
// (the names they do not hold last, sorted).
func weightsText(weights map[string]float64, sources []rpc.SourceStatus) string {
	names := make([]string, 0, len(weights))
	for name := range weights {
		names = append(names, name)
	}
	pos := func(name string) int {
		if k := slices.IndexFunc(sources, func(s rpc.SourceStatus) bool { return s.Name == name }); k >= 0 {
			return k
		}
		return len(sources)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(pos(a), pos(b)), cmp.Compare(a, b)) })
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = name + "=" + formatWeight(weights[name])
	}
	return strings.Join(parts, " ")
}

// printMixture prints a mixture's sources, one a line, and its schedule;
// records, when not negative, is the job's records consumed.
func printMixture(w io.Writer, sources []rpc.SourceStatus, schedule []rpc.WeightStep, records int64) {
	var total float64
	for _, s := range sources {
		total += s.Weight
	}
	label := fmt.Sprintf("%d", len(sources))
	if records >= 0 {
		label += fmt.Sprintf(", %d records consumed", records)
	}
	fmt.Fprintf(w, "%-11s %s\n", "sources:", label)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SOURCE\tWEIGHT\tSHARE\tPASS\tTASKS\tTODO\tPENDING\tDONE\tFAILED\tRECORDS\tFINISHED")
	for _, s := range sources {
		share := "-"
		if total > 0 {
			share = strconv.FormatFloat(100*s.Weight/total, 'f', 1, 64) + "%"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", s.Name, formatWeight(s.Weight), share, s.Pass, s.Tasks,
			s.Todo, s.Pending, s.Done, s.Failed, s.Records, s.Finished)
	}
	tw.Flush()
	if len(schedule) == 0 {
		fmt.Fprintf(w, "%-11s %s\n", "schedule:", "none")
		return
	}
	for i, step := range schedule {
		label := ""
		if i == 0 {
			label = "schedule:"
		}
		fmt.Fprintf(w, "%-11s at %d records: %s\n", label, step.AtRecords, weightsText(step.Weights, sources))
	}
}

// printSourcePatterns prints each source's patterns, for a mixture, whose
// own patterns are its sources'.
func printSourcePatterns(w io.Writer, sources []rpc.SourceStatus) {
	width := 0
	for _, s := range sources {
		width = max(width, len(s.Name))
	}
	first := true
	for _, s := range sources {
		globs := s.Globs
		if len(globs) == 0 {
			globs = []string{"unknown"}
		}
		for _, g := range globs {
			label := ""
			if first {
				label, first = "patterns:", false
			}
			fmt.Fprintf(w, "%-11s %-*s  %s\n", label, width, s.Name, g)
		}
	}
}
