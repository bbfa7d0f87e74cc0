package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/certs"
	"github.com/urfave/cli/v2"
)

// addrFlag is the --addr flag of every command that talks to a cluster.
func addrFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "addr",
		Usage:   "API address of any node, or several comma separated",
		Value:   "127.0.0.1:8001",
		EnvVars: env("addr"),
	}
}

// tokenFlag is --token, before or after the command's name. A token on
// a command line is visible to every user of the host (ps): prefer
// --token-file or RAFTMASTER_TOKEN.
func tokenFlag() cli.Flag {
	return &cli.StringFlag{Name: "token", Usage: "bearer token for a cluster started with serve --auth-tokens (a trainer or operator token); prefer --token-file or the environment, which other users of the host cannot see", EnvVars: []string{"RAFTMASTER_TOKEN"}}
}

// tokenFileFlag is --token-file: the token is read from a file, so that
// no command line carries it.
func tokenFileFlag() cli.Flag {
	return &cli.StringFlag{Name: "token-file", Usage: "read the bearer token from this file: its first line, or the first operator token of a file of serve --auth-tokens (keep it readable by you only)", EnvVars: []string{"RAFTMASTER_TOKEN_FILE"}, TakesFile: true}
}

// setIn returns the value of the string flag name from the innermost of
// c's contexts where it was set (after the command's name, or before it),
// and "" when none set it.
func setIn(c *cli.Context, name string) string {
	for _, ctx := range c.Lineage() {
		for _, n := range ctx.LocalFlagNames() {
			if n == name {
				return ctx.String(name)
			}
		}
	}
	for _, ctx := range c.Lineage() {
		if v := ctx.String(name); v != "" {
			return v // from the environment
		}
	}
	return ""
}

// token returns the bearer token of --token, --token-file or their
// environment variables; --token wins.
func token(c *cli.Context) (string, error) {
	if tok := setIn(c, "token"); tok != "" {
		return tok, nil
	}
	path := setIn(c, "token-file")
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok := tokenIn(string(b))
	if tok == "" {
		return "", fmt.Errorf("--token-file %s: no token: want the token on the first line, or a server token file with an operator line", path)
	}
	return tok, nil
}

// tokenIn returns the token of a token file: its first line, or, in a
// file of serve --auth-tokens' "ROLE TOKEN [JOBS]" lines, the first
// operator token, as the nodes present to each other (so that the CLI in
// a node's pod can use the node's own file).
func tokenIn(file string) string {
	lines := strings.Split(file, "\n")
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "operator" {
			return f[1]
		}
	}
	for _, line := range lines {
		if f := strings.Fields(line); len(f) >= 2 && (f[0] == "trainer" || f[0] == "#") {
			return "" // a server file without an operator token
		}
	}
	tok, _, _ := strings.Cut(file, "\n")
	return strings.TrimSpace(tok)
}

// tlsCAFlag is --tls-ca, of the app and of every command that talks to a
// cluster.
func tlsCAFlag() cli.Flag {
	return &cli.StringFlag{Name: "tls-ca", Usage: "talk HTTPS to a cluster started with serve --tls-cert, trusting the CA certificate(s) in this PEM file", EnvVars: []string{"RAFTMASTER_TLS_CA"}, TakesFile: true}
}

// clientFlags are the flags of every command that talks to a cluster:
// --addr, --retry, --token, --token-file and --tls-ca, then extra.
func clientFlags(extra ...cli.Flag) []cli.Flag {
	return append([]cli.Flag{addrFlag(), retryFlag(), tokenFlag(), tokenFileFlag(), tlsCAFlag(), dialTimeoutFlag()}, extra...)
}

// retryFlag bounds how long a command keeps retrying while no leader answers.
func retryFlag() cli.Flag {
	return &cli.DurationFlag{Name: "retry", Usage: "give up after retrying this long while the cluster has no leader", Value: 30 * time.Second}
}

// dialTimeoutFlag is --dial-timeout: how long a command tries to connect
// to any node of --addr before it fails, naming each address and what it
// did. Once connected, a command waits for a leader for its --retry.
func dialTimeoutFlag() cli.Flag {
	return &cli.DurationFlag{
		Name:    "dial-timeout",
		Usage:   "fail when no address of --addr could be connected to within this long, saying what each did (0 waits for --retry)",
		Value:   client.DefaultFirstContactTimeout,
		EnvVars: env("dial-timeout"),
	}
}

// cliLogger is the logger of a command's client: its waits for a leader,
// and warnings, on standard error.
func cliLogger(c *cli.Context) hclog.Logger {
	var w io.Writer = os.Stderr
	if c.App != nil && c.App.ErrWriter != nil {
		w = c.App.ErrWriter
	}
	return hclog.New(&hclog.LoggerOptions{Name: "raftmaster", Output: w, Level: hclog.Info, DisableTime: true})
}

// jobFlag is the --job flag of the commands that act on one job.
func jobFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "job",
		Usage:   "the job to act on: a DNS label such as resnet-2026-11-30 (see raftmaster job list)",
		Value:   "default",
		EnvVars: env("job"),
	}
}

// newClient builds a client from --addr, --retry and, for the commands
// that have it, --job, plus extra options.
func newClient(c *cli.Context, extra ...client.Option) (*client.Client, error) {
	var addrs []string
	for _, a := range strings.Split(c.String("addr"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("--addr is empty")
	}
	return newClientAt(c, addrs, extra...)
}

// newClientAt is newClient for the nodes at addrs rather than --addr.
func newClientAt(c *cli.Context, addrs []string, extra ...client.Option) (*client.Client, error) {
	opts := []client.Option{client.WithAddrs(addrs...), client.WithLogger(cliLogger(c)),
		client.WithFirstContactTimeout(c.Duration("dial-timeout"))}
	tok, err := token(c)
	if err != nil {
		return nil, err
	}
	if tok != "" {
		opts = append(opts, client.WithToken(tok))
	}
	if ca := c.String("tls-ca"); ca != "" {
		conf, err := certs.ClientTLS(ca)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		opts = append(opts, client.WithTLS(conf))
	}
	if job := c.String("job"); job != "" {
		opts = append(opts, client.WithJob(job))
	}
	if c.IsSet("retry") || c.Duration("retry") > 0 {
		opts = append(opts, client.WithRetry(c.Duration("retry")))
	}
	return client.NewClient(append(opts, extra...)...)
}

// withClient runs fn with a client that is closed afterwards.
func withClient(c *cli.Context, fn func(*client.Client) error) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(cl)
}

// outputFlags are --json and its other spelling, -o/--output json, of the
// commands that read.
func outputFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print the answer as JSON (as -o json)"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "the output format: text or json", Value: "text"},
	}
}

// wantJSON reports whether --json or -o json was given; another -o is an
// error.
func wantJSON(c *cli.Context) (bool, error) {
	switch o := c.String("output"); o {
	case "", "text", "table":
		return c.Bool("json"), nil
	case "json":
		return true, nil
	default:
		return false, fmt.Errorf("-o %q: want text or json", o)
	}
}
