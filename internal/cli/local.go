package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
)

func localCommand() *cli.Command {
	return &cli.Command{
		Name:  "local",
		Usage: "run a local cluster of real serve processes on 127.0.0.1, in the foreground",
		UsageText: "raftmaster local [--nodes 3] [--data-dir ./data] [--raft-port 7001] [--http-port 8001] [-- SERVE-FLAGS...]\n" +
			"raftmaster local -- --task-timeout 30s --chunks-per-task 2",
		Description: "Starts --nodes processes of \"raftmaster serve\" (n1, n2, ...) bootstrapped as one\n" +
			"cluster, with data under --data-dir/nI, Raft on consecutive ports from --raft-port and\n" +
			"the API from --http-port. Flags after -- go to every serve process. Ctrl-C stops them\n" +
			"all; run it again to restart the same cluster from its data.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "nodes", Value: 3, Usage: "number of replicas (3 or 5 tolerate 1 or 2 failures)"},
			&cli.StringFlag{Name: "data-dir", Value: "data", Usage: "parent directory of the nodes' data"},
			&cli.IntFlag{Name: "raft-port", Value: 7001, Usage: "Raft port of n1; nI uses raft-port+I-1"},
			&cli.IntFlag{Name: "http-port", Value: 8001, Usage: "API port of n1; nI uses http-port+I-1"},
		},
		Action: runLocal,
	}
}

func runLocal(c *cli.Context) error {
	n := c.Int("nodes")
	if n < 1 || n > 9 {
		return fmt.Errorf("--nodes %d: want 1 to 9", n)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	var peers, apis []string
	for i := 1; i <= n; i++ {
		peers = append(peers, fmt.Sprintf("n%d=127.0.0.1:%d", i, c.Int("raft-port")+i-1))
		apis = append(apis, fmt.Sprintf("127.0.0.1:%d", c.Int("http-port")+i-1))
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var cmds []*exec.Cmd
	exited := make(chan string, n)
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		args := []string{"serve",
			"--node-id", fmt.Sprintf("n%d", i),
			"--data-dir", filepath.Join(c.String("data-dir"), fmt.Sprintf("n%d", i)),
			"--raft-addr", strings.TrimPrefix(peers[i-1], fmt.Sprintf("n%d=", i)),
			"--http-addr", apis[i-1],
			"--peers", strings.Join(peers, ","),
		}
		cmd := exec.Command(exe, append(args, c.Args().Slice()...)...)
		cmd.Stdout, cmd.Stderr = c.App.ErrWriter, c.App.ErrWriter
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches us, we stop them in order
		if err := cmd.Start(); err != nil {
			stopAll(cmds)
			return fmt.Errorf("start n%d: %w", i, err)
		}
		cmds = append(cmds, cmd)
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			err := cmd.Wait()
			exited <- fmt.Sprintf("%s exited: %v", name, err)
		}(fmt.Sprintf("n%d", i))
	}
	go announce(ctx, c, apis)

	var result error
	select {
	case <-ctx.Done():
		fmt.Fprintln(c.App.ErrWriter, "stopping the local cluster")
	case msg := <-exited:
		result = errors.New(msg)
	}
	stopAll(cmds)
	wg.Wait()
	return result
}

// stopAll sends SIGTERM to every process; each hands over leadership and
// exits.
func stopAll(cmds []*exec.Cmd) {
	for _, cmd := range cmds {
		if cmd.Process != nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	}
}

// announce prints the API addresses once every node is ready.
func announce(ctx context.Context, c *cli.Context, apis []string) {
	client := &http.Client{Timeout: time.Second}
	for {
		ready := 0
		for _, a := range apis {
			if resp, err := client.Get("http://" + a + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ready++
				}
			}
		}
		if ready == len(apis) {
			fmt.Fprintf(c.App.Writer, "\nraftmaster: local cluster ready, API on %s\n"+
				"  inspect it:  raftmaster cluster inspect --addr %s\n"+
				"  stop it:     Ctrl-C\n\n", strings.Join(apis, ", "), apis[0])
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
}
