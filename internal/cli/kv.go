package cli

import (
	"fmt"
	"io"
	"os"
	"time"
	"unicode/utf8"

	"github.com/raftmaster/raftmaster/client"
	"github.com/urfave/cli/v2"
)

// kvMissExit is the exit status of kv get for a key that does not exist
// and of kv cas for a compare-and-set that did not swap: an answer, not a
// failure, which scripts tell apart from errors (1).
const kvMissExit = 2

func kvCommand() *cli.Command {
	return &cli.Command{
		Name:  "kv",
		Usage: "read, compare-and-set and delete the keys of a job's register (a rendezvous store)",
		Description: "Every job has a register: keys that hold a value and a version. A compare-and-set\n" +
			"stores a value only if the key is still at the version it names (0: the key must not\n" +
			"exist), and the value then gets a new version, which no key is ever given again; this is\n" +
			"what a torchrun RendezvousBackend needs. Reads go to the leader and are linearizable.\n" +
			"A delete frees the key (or, with --prefix, every key under a prefix); it needs a cluster\n" +
			"at protocol level 5. kv watch waits for a key to change, as a long poll at the leader.\n" +
			"Flags may come before or after KEY.",
		Subcommands: []*cli.Command{
			{
				Name:      "get",
				Usage:     "print a key's version and value; exit status 2 when the key does not exist",
				UsageText: "raftmaster kv get [--addr 127.0.0.1:8001] [--job JOB] [--json | --raw] KEY",
				Flags: clientFlags(append([]cli.Flag{jobFlag(),
					&cli.BoolFlag{Name: "raw", Usage: "print the value's bytes alone, as stored"},
				}, outputFlags()...)...),
				Action: func(c *cli.Context) error {
					key, err := kvKey(c)
					if err != nil {
						return err
					}
					asJSON, err := wantJSON(c)
					if err != nil {
						return err
					}
					return withClient(c, func(cl *client.Client) error {
						v, err := cl.KVGet(c.Context, key)
						if err != nil {
							return err
						}
						switch {
						case asJSON:
							err = printJSON(c.App.Writer, kvAnswer{Key: key, Found: v.Found, Value: v.Value, Version: v.Version})
						case c.Bool("raw"):
							_, err = c.App.Writer.Write(v.Value)
						case v.Found:
							printKV(c.App.Writer, key, v)
						}
						if err == nil && !v.Found {
							return cli.Exit(fmt.Sprintf("key %q does not exist in job %s", key, c.String("job")), kvMissExit)
						}
						return err
					})
				},
			},
			{
				Name:  "cas",
				Usage: "store a value if the key is at --version (0: absent); exit status 2, with the key as it is, when it is not",
				UsageText: "raftmaster kv cas [--addr 127.0.0.1:8001] [--job JOB] KEY --version N (--value V | --value-file FILE) [--json]\n" +
					"raftmaster kv cas rdzv --version 0 --value '{\"round\":1}'",
				Flags: clientFlags(append([]cli.Flag{jobFlag(),
					&cli.Uint64Flag{Name: "version", Usage: "the version the key must be at: the one kv get printed, or 0 for a key that must not exist"},
					&cli.StringFlag{Name: "value", Usage: "the value to store"},
					&cli.StringFlag{Name: "value-file", Usage: "read the value to store from FILE (- for stdin)"},
				}, outputFlags()...)...),
				Action: func(c *cli.Context) error {
					key, err := kvKey(c)
					if err != nil {
						return err
					}
					value, err := kvValue(c)
					if err != nil {
						return err
					}
					asJSON, err := wantJSON(c)
					if err != nil {
						return err
					}
					return withClient(c, func(cl *client.Client) error {
						res, err := cl.KVCompareAndSet(c.Context, key, c.Uint64("version"), value)
						if err != nil {
							return err
						}
						switch {
						case asJSON:
							err = printJSON(c.App.Writer, kvAnswer{Key: key, Swapped: &res.Swapped, Found: res.Found, Value: res.Value, Version: res.Version})
						case res.Swapped:
							fmt.Fprintf(c.App.Writer, "swapped: %s is at version %d\n", key, res.Version)
						case res.Found:
							fmt.Fprintln(c.App.Writer, "not swapped; the key is now:")
							printKV(c.App.Writer, key, res.KVValue)
						}
						if err == nil && !res.Swapped {
							return cli.Exit(fmt.Sprintf("not swapped: key %q is at version %d, not %d", key, res.Version, c.Uint64("version")), kvMissExit)
						}
						return err
					})
				},
			},
			{
				Name: "delete",
				Usage: "delete a key, or with --prefix every key under a prefix; " +
					"exit status 2, with the key's version, when a key is not deleted",
				UsageText: "raftmaster kv delete [--addr 127.0.0.1:8001] [--job JOB] [--version N] [--json] KEY\n" +
					"raftmaster kv delete --prefix [--json] PREFIX\n" +
					"raftmaster kv delete --job resnet-2026-11-30 --prefix torchrun/store/run-1/",
				Flags: clientFlags(append([]cli.Flag{jobFlag(),
					&cli.BoolFlag{Name: "prefix", Usage: "delete every key that starts with KEY, in one log entry"},
					&cli.Uint64Flag{Name: "version", Usage: "delete the key only while it is at this version (the one kv get printed); 0: any"},
				}, outputFlags()...)...),
				Action: kvDelete,
			},
			{
				Name: "watch",
				Usage: "wait until a key's version differs from --after (0: until the key exists) and print the key; " +
					"exit status 2, with the key as it is, when --timeout passes first",
				UsageText: "raftmaster kv watch [--addr 127.0.0.1:8001] [--job JOB] [--after N] [--timeout D] [--json | --raw] KEY\n" +
					"raftmaster kv watch --after 7 --timeout 5m rdzv",
				Flags: clientFlags(append([]cli.Flag{jobFlag(),
					&cli.Uint64Flag{Name: "after", Usage: "the version the key is known at (the one kv get printed): " +
						"wait until it is written again or deleted; 0 waits until the key exists"},
					&cli.DurationFlag{Name: "timeout", Value: time.Minute, Usage: "how long to wait; 0 looks once"},
					&cli.BoolFlag{Name: "raw", Usage: "print the value's bytes alone, as stored"},
				}, outputFlags()...)...),
				Action: kvWatch,
			},
		},
	}
}

// kvDelete is the action of kv delete.
func kvDelete(c *cli.Context) error {
	key, err := kvKey(c)
	if err != nil {
		return err
	}
	asJSON, err := wantJSON(c)
	if err != nil {
		return err
	}
	prefix := c.Bool("prefix")
	if prefix && c.IsSet("version") {
		return fmt.Errorf("--version names one key's version: it does not go with --prefix")
	}
	return withClient(c, func(cl *client.Client) error {
		if prefix {
			n, err := cl.KVDeletePrefix(c.Context, key)
			switch {
			case err != nil:
				return err
			case asJSON:
				return printJSON(c.App.Writer, kvPrefixAnswer{Prefix: key, Deleted: n})
			}
			fmt.Fprintf(c.App.Writer, "deleted %d keys under %s\n", n, key)
			return nil
		}
		res, err := cl.KVDelete(c.Context, key, c.Uint64("version"))
		switch {
		case err != nil:
			return err
		case asJSON:
			err = printJSON(c.App.Writer, kvDeleteAnswer{Key: key, Deleted: res.Deleted, Found: res.Found, Version: res.Version})
		case res.Deleted:
			fmt.Fprintf(c.App.Writer, "deleted: %s was at version %d\n", key, res.Version)
		}
		switch {
		case err != nil || res.Deleted:
			return err
		case res.Found:
			return cli.Exit(fmt.Sprintf("not deleted: key %q is at version %d, not %d", key, res.Version, c.Uint64("version")), kvMissExit)
		}
		return cli.Exit(fmt.Sprintf("key %q does not exist in job %s", key, c.String("job")), kvMissExit)
	})
}

// kvWatch is the action of kv watch.
func kvWatch(c *cli.Context) error {
	key, err := kvKey(c)
	if err != nil {
		return err
	}
	asJSON, err := wantJSON(c)
	if err != nil {
		return err
	}
	after, timeout := c.Uint64("after"), c.Duration("timeout")
	return withClient(c, func(cl *client.Client) error {
		res, err := cl.KVWatch(c.Context, key, after, timeout)
		switch {
		case err != nil:
			return err
		case asJSON:
			err = printJSON(c.App.Writer, kvWatchAnswer{Key: key, Found: res.Found, Value: res.Value, Version: res.Version, TimedOut: res.TimedOut})
		case c.Bool("raw"):
			_, err = c.App.Writer.Write(res.Value)
		case res.Found:
			printKV(c.App.Writer, key, res.KVValue)
		case !res.TimedOut:
			fmt.Fprintf(c.App.Writer, "deleted: %s no longer exists\n", key)
		}
		switch {
		case err != nil || !res.TimedOut:
			return err
		case res.Found:
			return cli.Exit(fmt.Sprintf("timed out after %v: key %q is still at version %d", timeout, key, res.Version), kvMissExit)
		}
		return cli.Exit(fmt.Sprintf("timed out after %v: key %q does not exist in job %s", timeout, key, c.String("job")), kvMissExit)
	})
}

// kvWatchAnswer is what kv watch --json prints: the wire answer.
type kvWatchAnswer struct {
	Key      string `json:"key"`
	Found    bool   `json:"found"`
	Value    []byte `json:"value"`
	Version  uint64 `json:"version"`
	TimedOut bool   `json:"timed_out"`
}

// kvDeleteAnswer and kvPrefixAnswer are what kv delete --json prints: the
// wire answers.
type kvDeleteAnswer struct {
	Key     string `json:"key"`
	Deleted bool   `json:"deleted"`
	Found   bool   `json:"found"`
	Version uint64 `json:"version"`
}

type kvPrefixAnswer struct {
	Prefix  string `json:"prefix"`
	Deleted int    `json:"deleted"`
}

// kvAnswer is what --json prints: the wire answer.
type kvAnswer struct {
	Key     string `json:"key"`
	Swapped *bool  `json:"swapped,omitempty"`
	Found   bool   `json:"found"`
	Value   []byte `json:"value"`
	Version uint64 `json:"version"`
}

// printKV prints a key's version and value: as text when it is UTF-8
// without control characters other than newlines and tabs, else its size.
func printKV(w io.Writer, key string, v client.KVValue) {
	fmt.Fprintf(w, "key:     %s\nversion: %d\n", key, v.Version)
	if printableText(v.Value) {
		fmt.Fprintf(w, "value:   %s\n", v.Value)
	} else {
		fmt.Fprintf(w, "value:   %d bytes of binary data (see --raw or --json)\n", len(v.Value))
	}
}

// printableText reports whether b reads as text on a terminal.
func printableText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r < ' ' && r != '\n' && r != '\t' || r == 0x7f {
			return false
		}
	}
	return true
}

// kvKey returns the KEY argument of a kv subcommand.
func kvKey(c *cli.Context) (string, error) {
	args := c.Args().Slice()
	if len(args) != 1 {
		return "", fmt.Errorf("give one KEY, got %d arguments %q", len(args), args)
	}
	return args[0], nil
}

// kvValue returns the value of kv cas: --value, or the contents of
// --value-file; exactly one of them.
func kvValue(c *cli.Context) ([]byte, error) {
	switch file := c.String("value-file"); {
	case c.IsSet("value") == c.IsSet("value-file"):
		return nil, fmt.Errorf("give the value with exactly one of --value and --value-file")
	case c.IsSet("value"):
		return []byte(c.String("value")), nil
	case file == "-":
		return io.ReadAll(c.App.Reader)
	default:
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--value-file: %w", err)
		}
		return b, nil
	}
}
