package cli

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/internal/backup"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/urfave/cli/v2"
)

// backupReport is what backup inspect prints: the file's description and
// a summary of the state it holds.
type backupReport struct {
	File string `json:"file"`
	// Format is the file's format version, 1 or 2.
	Format int `json:"format"`
	// Version is the build of the node that took the backup, Index the
	// last log entry it includes.
	Version string `json:"version"`
	Index   uint64 `json:"index"`
	// FileSize is the file's length, StateSize the state's.
	FileSize  int64 `json:"file_size"`
	StateSize int64 `json:"state_size"`
	// StateHash is the SHA-256 of the state the file records;
	// HashChecked is true once the state read matched it and its length.
	StateHash   string `json:"state_hash"`
	HashChecked bool   `json:"hash_checked"`
	// Era counts the restores that led to the state; a restore of the
	// file starts era Era+1.
	Era uint64 `json:"era"`
	// Protocol is the state's protocol level, Clock its FSM time.
	Protocol   uint64     `json:"protocol"`
	Clock      time.Time  `json:"clock"`
	StateBytes int64      `json:"state_bytes"`
	Limits     rpc.Limits `json:"limits"`
	// Nodes are the node registry's entries.
	Nodes []fsm.Registration `json:"nodes"`
	Jobs  []backupJob        `json:"jobs"`
}

// backupJob is one job of a backup: its summary and its dataset's size.
type backupJob struct {
	rpc.Job
	Files  int `json:"files"`
	Chunks int `json:"chunks"`
}

func backupInspectCommand() *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "describe a backup file and check it, without a cluster",
		UsageText: "raftmaster backup inspect [--json | -o json] FILE",
		Description: "Reads the whole file: its format, the index and release it was taken at, the\n" +
			"state's size and SHA-256, which is checked against the state read, and a summary of\n" +
			"the state (protocol level, era, limits, registered nodes, and every job with its\n" +
			"dataset, tasks and register keys). A corrupt or truncated file is an error that\n" +
			"says what is wrong, and the command exits 1.",
		Flags: outputFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("give one backup FILE, got %d arguments", c.NArg())
			}
			asJSON, err := wantJSON(c)
			if err != nil {
				return err
			}
			rep, err := inspectBackup(c.Args().First())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.App.Writer, rep)
			}
			printBackupReport(c.App.Writer, rep)
			return nil
		},
	}
}

// inspectBackup opens the backup file at path, decodes its state while
// checking its length and SHA-256, and summarises it.
func inspectBackup(path string) (backupReport, error) {
	rep := backupReport{File: path}
	f, err := os.Open(path)
	if err != nil {
		return rep, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return rep, err
	}
	if !st.Mode().IsRegular() {
		return rep, fmt.Errorf("%s is not a regular file", path)
	}
	bf, err := backup.Open(f, st.Size())
	if err != nil {
		return rep, fmt.Errorf("%s: %w", path, err)
	}
	h := bf.Header
	rep.Format, rep.Version, rep.Index = bf.Format, h.Version, h.Index
	rep.FileSize, rep.StateSize, rep.StateHash = st.Size(), h.Size, h.StateHash

	// The state streams from the check into the decoder.
	pr, pw := io.Pipe()
	copied := make(chan error, 1)
	go func() {
		err := bf.CopyState(pw)
		pw.CloseWithError(err)
		copied <- err
	}()
	m := fsm.New()
	restoreErr := m.Restore(pr) // reads to the end, or to the copy's error
	copyErr := <-copied
	switch {
	case copyErr != nil:
		return rep, fmt.Errorf("%s: %w", path, copyErr)
	case restoreErr != nil:
		return rep, fmt.Errorf("%s: its length and SHA-256 match, but its state does not decode: %w", path, restoreErr)
	}
	rep.HashChecked = true
	rep.Era, rep.Protocol = m.Era(), m.Protocol()
	rep.Clock = httpapi.FSMTime(m.Clock())
	rep.StateBytes = m.Stats(fsm.DefaultJob).StateBytes
	rep.Limits = httpapi.LimitsFromFSM(m.Limits())
	rep.Nodes = m.Registrations()
	rep.Jobs = []backupJob{}
	for _, j := range m.Jobs() {
		s := m.Stats(j.Name)
		rep.Jobs = append(rep.Jobs, backupJob{Job: httpapi.JobFromFSM(j), Files: s.Files, Chunks: s.Chunks})
	}
	return rep, nil
}

// printBackupReport prints the report as text.
func printBackupReport(w io.Writer, r backupReport) {
	fmt.Fprintf(w, "file:       %s (%s)\n", r.File, humanBytes(r.FileSize))
	fmt.Fprintf(w, "format:     raftmaster-backup v%d\n", r.Format)
	fmt.Fprintf(w, "taken:      at index %d by %s\n", r.Index, orDash(r.Version))
	fmt.Fprintf(w, "state:      %d bytes (%s), SHA-256 %s: checked, intact\n", r.StateSize, humanBytes(r.StateSize), r.StateHash)
	fmt.Fprintf(w, "era:        %d (a restore of this file starts era %d)\n", r.Era, r.Era+1)
	fmt.Fprintf(w, "protocol:   level %d\n", r.Protocol)
	fmt.Fprintf(w, "FSM clock:  %s\n", fsmTimeText(r.Clock))
	fmt.Fprintf(w, "estimate:   state about %s (max-state-bytes %s)\n", humanBytes(r.StateBytes), humanBytes(r.Limits.MaxStateBytes))
	fmt.Fprintf(w, "nodes:      %d registered\n", len(r.Nodes))
	if len(r.Nodes) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  NODE\tRAFT ADDR\tAPI ADDR\tVERSION")
		for _, n := range r.Nodes {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", n.ID, n.RaftAddr, orDash(n.APIAddr), memberVersion(rpc.Member{Version: n.Version, Protocol: n.Protocol}))
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "jobs:       %d\n", len(r.Jobs))
	if len(r.Jobs) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  JOB\tFILES\tCHUNKS\tTASKS\tPASS\tTODO\tPENDING\tDONE\tFAILED\tGROUPS\tKV KEYS\tSAVE LEASE\tSIZE")
		for _, j := range r.Jobs {
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", j.Name, j.Files, j.Chunks, j.Tasks, j.Pass,
				j.Todo, j.Pending, j.Done, j.Failed, j.Groups, j.KVKeys, orDash(j.SaveHolder), humanBytes(j.Bytes))
		}
		tw.Flush()
	}
}
