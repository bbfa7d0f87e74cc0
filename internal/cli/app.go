// Package cli defines the raftmaster command line: every command, its flags
// and its help text. The main package only calls Run, so tests can drive the
// whole command line in-process.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/raftmaster/raftmaster/internal/version"
	"github.com/urfave/cli/v2"
)

// NewApp returns the raftmaster application writing to stdout and stderr.
func NewApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:  "raftmaster",
		Usage: "fault-tolerant data-dispatch and rendezvous master for distributed training",
		Description: "raftmaster keeps the state of a training job's master (the task queue over\n" +
			"RecordIO datasets, the save-model lease and allgather groups) in a Raft-replicated\n" +
			"state machine on 3 or 5 replicas. Trainers use the Go client or the HTTP API.",
		Version:              version.String(),
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		Suggest:              true,
		Commands:             commands(),
		Flags: []cli.Flag{
			tokenFlag(),
			tokenFileFlag(),
			tlsCAFlag(),
			dialTimeoutFlag(),
		},
		ExitErrHandler: func(c *cli.Context, err error) {
			// Errors are printed once by Run; do not let urfave exit the process.
		},
	}
}

// commands lists the top-level commands; each lives in its own file.
func commands() []*cli.Command {
	return []*cli.Command{
		serveCommand(),
		localCommand(),
		clusterCommand(),
		datasetCommand(),
		jobCommand(),
		limitsCommand(),
		kvCommand(),
		sessionCommand(),
		cursorCommand(),
		recoverCommand(),
		backupCommand(),
		restoreCommand(),
		allgatherCommand(),
		healthCommand(),
		recordioCommand(),
		benchCommand(),
		tlsCommand(),
		keygenCommand(),
		completionCommand(),
	}
}

// Run runs the command line with args (args[0] is the program name) and
// returns the process exit code.
func Run(args []string) int {
	return RunWith(args, os.Stdout, os.Stderr)
}

// RunWith is Run with explicit output streams.
func RunWith(args []string, stdout, stderr io.Writer) int {
	app := NewApp(stdout, stderr)
	args, err := normalizeArgs(app, args)
	if errors.Is(err, errNoCompletion) {
		return 0
	}
	if err == nil {
		err = app.Run(args)
	}
	if err != nil {
		fmt.Fprintln(stderr, errorLine(err))
		if ec, ok := err.(cli.ExitCoder); ok && ec.ExitCode() != 0 {
			return ec.ExitCode()
		}
		return 1
	}
	return 0
}

// errorLine is the line that reports err: prefixed with the program's
// name, once, whether or not the error names the client already
// ("raftmaster client: ...").
func errorLine(err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, "raftmaster client: ") {
		return "raftmaster: " + strings.TrimPrefix(msg, "raftmaster client: ")
	}
	return "raftmaster: " + msg
}
