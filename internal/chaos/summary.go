package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Summary aggregates the reports of several runs.
type Summary struct {
	Runs, Ops, Violations int
	// JobOps counts the operations of each job, JobNames the jobs in the
	// order they were first seen.
	JobOps   map[string]int
	JobNames []string
	// Injected counts the faults of each kind.
	Injected map[FaultKind]int
	// Longest holds, per kind, each run's longest unavailability.
	Longest map[FaultKind][]time.Duration
	// Sessions sums the jobs' session counts.
	Sessions SessionReport
	// Resume sums the resume schedules.
	Resume ResumeReport
}

// Add folds one run's report in.
func (s *Summary) Add(rep Report) {
	if s.Injected == nil {
		s.Injected, s.Longest = map[FaultKind]int{}, map[FaultKind][]time.Duration{}
		s.JobOps = map[string]int{}
	}
	s.Runs++
	s.Ops += rep.Ops
	for _, j := range rep.Jobs {
		if _, ok := s.JobOps[j.Name]; !ok {
			s.JobNames = append(s.JobNames, j.Name)
		}
		s.JobOps[j.Name] += j.Ops
		s.Sessions.add(j.Sessions)
	}
	s.Resume.add(rep.Resume)
	s.Violations += len(rep.Violations)
	for _, f := range rep.Faults {
		s.Injected[f.Kind]++
	}
	for k, d := range rep.Unavailable {
		s.Longest[k] = append(s.Longest[k], d)
	}
}

// Write prints the totals, the operations of each job, and a table: per fault kind, how often it was
// injected, and the median and worst of the runs' longest unavailability.
func (s *Summary) Write(w io.Writer) error {
	faults := 0
	for _, n := range s.Injected {
		faults += n
	}
	fmt.Fprintf(w, "%d runs, %d faults, %d operations, %d violations\n", s.Runs, faults, s.Ops, s.Violations)
	if len(s.JobNames) > 0 {
		parts := make([]string, len(s.JobNames))
		for i, j := range s.JobNames {
			parts[i] = fmt.Sprintf("%s %d", j, s.JobOps[j])
		}
		fmt.Fprintf(w, "operations per job: %s\n", strings.Join(parts, ", "))
	}
	ss := s.Sessions
	fmt.Fprintf(w, "sessions: %d opened, %d ended, %d stalls; %d keep-alives (%d expired), %d writes refused; task ops %d under sessions, %d without\n",
		ss.Opened, ss.Ended, ss.Stalls, ss.KeepAlives, ss.KeepAlivesExpired, ss.Refused, ss.TaskOps, ss.LeaseOps)
	r := s.Resume
	fmt.Fprintf(w, "resume: %d schedules, %d full restarts (%d between a commit and its save), %d checkpoints: %d duplicates, %d losses\n",
		r.Schedules, r.Restarts, r.Torn, r.Checkpoints, r.Duplicates, r.Losses)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FAULT\tINJECTED\tMEDIAN LONGEST UNAVAILABILITY\tWORST")
	for _, k := range AllFaults {
		ds := slices.Clone(s.Longest[k])
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		fmt.Fprintf(tw, "%s\t%d\t%v\t%v\n", k, s.Injected[k], ds[len(ds)/2].Round(10*time.Millisecond), ds[len(ds)-1].Round(10*time.Millisecond))
	}
	return tw.Flush()
}
