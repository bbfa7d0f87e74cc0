package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/raftmaster/raftmaster/internal/certs"
	"github.com/raftmaster/raftmaster/internal/procs"
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
			"the API from --http-port. Raft between the nodes is mutual TLS with a cluster key made\n" +
			"once in --data-dir/cluster.key (--tls: certificates instead). Flags after -- go to every\n" +
			"serve process. A node that dies leaves the others serving: the command says how it\n" +
			"ended and prints the command line that restarts it by hand, with the same data and\n" +
			"flags. Ctrl-C (or SIGTERM) stops them all; run it again to restart the same cluster\n" +
			"from its data.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "nodes", Value: 3, Usage: "number of replicas (3 or 5 tolerate 1 or 2 failures)"},
			&cli.StringFlag{Name: "data-dir", Value: "data", Usage: "parent directory of the nodes' data"},
			&cli.IntFlag{Name: "raft-port", Value: 7001, Usage: "Raft port of n1; nI uses raft-port+I-1"},
			&cli.IntFlag{Name: "http-port", Value: 8001, Usage: "API port of n1; nI uses http-port+I-1"},
			&cli.BoolFlag{Name: "insecure", Usage: "run Raft between the nodes without authentication (default: mutual TLS with a cluster key made once in --data-dir/cluster.key)"},
			&cli.BoolFlag{Name: "tls", Usage: "serve HTTPS and run Raft over mutual TLS, with development certificates made once in --data-dir/tls (clients: --tls-ca --data-dir/tls/ca.crt)"},
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
	// Absolute paths, so that the command that restarts a node by hand
	// works from any directory.
	dataDir, err := filepath.Abs(c.String("data-dir"))
	if err != nil {
		return err
	}
	var raftAddrs, apis []string
	for i := range n {
		raftAddrs = append(raftAddrs, fmt.Sprintf("127.0.0.1:%d", c.Int("raft-port")+i))
		apis = append(apis, fmt.Sprintf("127.0.0.1:%d", c.Int("http-port")+i))
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	serveArgs := c.Args().Slice()
	var tlsConf *tls.Config
	if !c.Bool("tls") && !c.Bool("insecure") {
		// Raft between the nodes is mutual TLS with a key of their own.
		keyArgs, err := procs.ClusterKeyArgs(dataDir)
		if err != nil {
			return err
		}
		serveArgs = append(keyArgs, serveArgs...)
	}
	if c.Bool("insecure") {
		serveArgs = append([]string{"--insecure"}, serveArgs...)
	}
	if c.Bool("tls") {
		dir := filepath.Join(dataDir, "tls")
		if _, err := os.Stat(filepath.Join(dir, certs.CAFile)); err != nil {
			if _, err := certs.Generate(certs.GenerateOptions{Dir: dir, Hosts: []string{"127.0.0.1", "localhost"}}); err != nil {
				return err
			}
		}
		if tlsConf, err = certs.ClientTLS(filepath.Join(dir, certs.CAFile)); err != nil {
			return err
		}
		serveArgs = append([]string{"--tls-cert", filepath.Join(dir, certs.NodeCertFile),
			"--tls-key", filepath.Join(dir, certs.NodeKeyFile), "--tls-ca", filepath.Join(dir, certs.CAFile)}, serveArgs...)
	}
	nodes := procs.RaftProcs(dataDir, raftAddrs, apis, serveArgs...)
	exited := make(chan *procs.Proc, n)
	for _, p := range nodes {
		p.Output = c.App.ErrWriter
		if err := p.Launch(exe); err != nil {
			procs.StopAll(nodes, 15*time.Second)
			return err
		}
		go func() {
			<-p.Exited()
			exited <- p
		}()
	}
	go announce(ctx, c, apis, tlsConf)

	var result error
	for running := n; running > 0; {
		select {
		case <-ctx.Done():
			fmt.Fprintln(c.App.ErrWriter, "stopping the local cluster")
			running = 0
			continue
		case p := <-exited:
			running--
			fmt.Fprint(c.App.ErrWriter, deadNodeHint(p, exe, nodes))
			if running == 0 {
				result = errors.New("every node of the local cluster exited")
			}
		}
	}
	// Each node hands leadership over and exits.
	procs.StopAll(nodes, 15*time.Second)
	return result
}

// deadNodeHint says that p exited and how, which nodes still run, and the
// command line that restarts p by hand with its data and flags.
func deadNodeHint(p *procs.Proc, exe string, nodes []*procs.Proc) string {
	how := p.ExitStatus()
	if how == "" {
		how = "exit status 0"
	}
	var alive []string
	for _, q := range nodes {
		if q != p && q.Running() {
			alive = append(alive, q.ID)
		}
	}
	left := "no node is left running"
	if len(alive) > 0 {
		left = strings.Join(alive, ", ") + " keep serving"
		if len(alive) == 1 {
			left = alive[0] + " keeps serving"
		}
	}
	quorum := len(nodes)/2 + 1
	if len(alive) < quorum {
		left += fmt.Sprintf(" (without a leader until %d nodes run)", quorum)
	}
	return fmt.Sprintf("\nraftmaster local: node %s exited (%s); %s.\n"+
		"  restart it by hand (in another terminal; it comes back with its data):\n"+
		"  %s\n"+
		"  Ctrl-C here stops the nodes this command started.\n\n",
		p.ID, how, left, shellJoin(append([]string{exe}, p.Args...)))
}

// shellJoin quotes args for a POSIX shell.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,@%+-") == "" {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

// announce prints the API addresses once every node is ready.
func announce(ctx context.Context, c *cli.Context, apis []string, tlsConf *tls.Config) {
	if procs.WaitReady(ctx, apis, tlsConf) != nil {
		return
	}
	// The first commands a user types get every feature of the release
	// (a dataset's patterns are recorded from level 4) once the new
	// cluster's protocol level has risen, which takes a moment after its
	// members have registered.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := procs.WaitProtocol(wctx, apis[0], tlsConf)
	cancel()
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		fmt.Fprintf(c.App.ErrWriter, "raftmaster: local: the cluster's protocol level has not risen yet (%v): later features wait for it\n", err)
	}
	hint := ""
	if tlsConf != nil {
		hint = fmt.Sprintf("  TLS is on:    export RAFTMASTER_TLS_CA=%s\n", filepath.Join(c.String("data-dir"), "tls", certs.CAFile))
	}
	fmt.Fprintf(c.App.Writer, "\nraftmaster: local cluster ready, API on %s\n%s"+
		"  inspect it:  raftmaster cluster inspect --addr %s\n"+
		"  stop it:     Ctrl-C\n\n", strings.Join(apis, ", "), hint, apis[0])
}
