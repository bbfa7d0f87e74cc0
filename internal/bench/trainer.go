package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/raftmaster/raftmaster/client"
)

// trainerMode is the first argument that makes the bench binary a trainer
// that leases one task and holds it until it is killed: the trainer whose
// death the sessions part measures.
const trainerMode = "hold-task"

// heldTask is what a holding trainer prints on its standard output, one
// JSON line, once it has leased its task.
type heldTask struct {
	Job  string          `json:"job"`
	Pass int             `json:"pass"`
	Meta client.TaskMeta `json:"meta"`
	// Session is the session that holds the task, 0 for a lease.
	Session uint64 `json:"session"`
	// LeaseMs is the lease of a task held without a session.
	LeaseMs float64 `json:"lease_ms"`
}

// trainerMain leases one task of a pass through the Go client and holds
// it until the process is killed: under the client's session (the
// client's default), which its keep-alives hold; or, with --no-session,
// under a lease that it renews every third of its length, as the client's
// record reader does. It returns the exit code.
func trainerMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(trainerMode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addrs := fs.String("addrs", "", "the cluster's API addresses, comma separated")
	job := fs.String("job", "", "the job (default: the default job)")
	pass := fs.Int("pass", 0, "the pass to lease a task of")
	noSession := fs.Bool("no-session", false, "lease without a session (client.WithoutSession)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *addrs == "" {
		fmt.Fprintln(stderr, "hold-task: need --addrs")
		return 2
	}
	opts := []client.Option{client.WithAddrs(strings.Split(*addrs, ",")...), client.WithRetry(time.Minute)}
	if *job != "" {
		opts = append(opts, client.WithJob(*job))
	}
	if *noSession {
		opts = append(opts, client.WithoutSession())
	}
	cl, err := client.NewClient(opts...)
	if err != nil {
		fmt.Fprintf(stderr, "hold-task: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var task client.Task
	for {
		task, err = cl.GetTaskContext(ctx, *pass)
		if err == nil {
			break
		}
		if errors.Is(err, client.ErrPassAfter) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		fmt.Fprintf(stderr, "hold-task: GetTask(%d): %v\n", *pass, err)
		return 1
	}
	line := heldTask{Job: *job, Pass: *pass, Meta: task.Meta, Session: task.Session, LeaseMs: float64(task.Lease) / float64(time.Millisecond)}
	if err := json.NewEncoder(stdout).Encode(line); err != nil {
		return 1
	}
	if task.Session == 0 && task.Lease > 0 {
		// Renew as the reader does, so that the lease left at the kill is
		// what a live trainer's would be.
		for {
			time.Sleep(max(task.Lease/3, 100*time.Millisecond))
			if err := cl.RenewLease(task.Meta); err != nil {
				fmt.Fprintf(stderr, "hold-task: RenewLease: %v\n", err)
			}
		}
	}
	// The session's keep-alives run in the client's background until the
	// process is killed.
	for {
		time.Sleep(time.Hour)
	}
}
