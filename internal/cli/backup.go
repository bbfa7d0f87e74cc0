package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/backup"
	"github.com/raftmaster/raftmaster/raftnode"
	"github.com/urfave/cli/v2"
)

func backupCommand() *cli.Command {
	return &cli.Command{
		Name:  "backup",
		Usage: "take an online, consistent backup of the whole state from the leader",
		UsageText: "raftmaster backup --addr 127.0.0.1:8001 --out raftmaster-backup.bin\n" +
			"raftmaster backup inspect raftmaster-backup.bin",
		Description: "The leader answers after a read barrier, so the backup holds every write\n" +
			"acknowledged before it; the cluster goes on serving meanwhile. The state is streamed\n" +
			"into the file as the leader encodes it, so its size is bounded by neither side's\n" +
			"memory, and checked against the length and SHA-256 the leader sends at the end. The\n" +
			"file (mode 0600, written under a temporary name, synced, then renamed) holds the\n" +
			"state, its index, its SHA-256 and the version of the node that took it; a failed or\n" +
			"interrupted backup leaves no file. Progress goes to stderr: every second while stderr\n" +
			"is a terminal, and a last line in any case. raftmaster restore starts a new cluster\n" +
			"from the file; raftmaster backup inspect describes and checks it.",
		Flags: clientFlags(
			&cli.StringFlag{Name: "out", Usage: "the backup file to write (replaced if it exists); required", TakesFile: true},
		),
		Subcommands: []*cli.Command{backupInspectCommand()},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return fmt.Errorf("backup takes flags only, not %q (backup inspect FILE reads a backup file)", c.Args().First())
			}
			if c.String("out") == "" {
				return fmt.Errorf("give the file to write with --out FILE")
			}
			return withClient(c, func(cl *client.Client) error {
				ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
				defer stop()
				out := c.String("out")
				prog := newTransfer(c.App.ErrWriter, "received")
				h, err := writeBackup(ctx, cl, out, prog)
				if err != nil {
					return err
				}
				prog.finish()
				fmt.Fprintf(c.App.Writer, "backup of index %d (state %s, %d bytes) written to %s\n", h.Index, h.StateHash, h.Size, out)
				return nil
			})
		},
	}
}

// writeBackup streams the leader's state into a backup file at out: a
// temporary file of mode 0600 beside it, synced and renamed over out only
// once the state is whole and checked. On failure no file is left.
func writeBackup(ctx context.Context, cl *client.Client, out string, prog *transfer) (h backup.Header, err error) {
	dir := filepath.Dir(out)
	f, err := os.CreateTemp(dir, "."+filepath.Base(out)+".tmp-*")
	if err != nil {
		return h, err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw, err := backup.NewWriter(f)
	if err != nil {
		return h, err
	}
	info, err := cl.BackupTo(ctx, prog.writer(bw))
	if err != nil {
		return h, err
	}
	if h, err = bw.Finish(info.Version, info.Index); err != nil {
		return h, err
	}
	if h.StateHash != info.StateHash || h.Size != info.Size {
		return h, fmt.Errorf("the file's state (%d bytes, hash %s) is not the leader's (%d bytes, hash %s)", h.Size, h.StateHash, info.Size, info.StateHash)
	}
	if err = f.Sync(); err != nil {
		return h, err
	}
	if err = f.Close(); err != nil {
		return h, err
	}
	if err = os.Rename(tmp, out); err != nil {
		return h, err
	}
	// The rename is durable once the directory is synced.
	if d, derr := os.Open(dir); derr == nil {
		derr = d.Sync()
		d.Close()
		if derr != nil && !errors.Is(derr, syscall.EINVAL) {
			return h, fmt.Errorf("syncing %s: %w", dir, derr)
		}
	}
	return h, nil
}

func restoreCommand() *cli.Command {
	return &cli.Command{
		Name:      "restore",
		Usage:     "make the data directory of a new cluster's first node from a backup",
		UsageText: "raftmaster restore --in raftmaster-backup.bin --data-dir /var/lib/raftmaster --node-id n1 --raft-addr 10.0.0.1:7001",
		Description: "Streams the state from the file into the new node's Raft snapshot, checking its\n" +
			"length and SHA-256 as it goes, so the state need not fit in memory. A corrupt or\n" +
			"truncated file, or a directory that already holds Raft state, is refused, and nothing\n" +
			"is left written. Files of earlier releases are read too. Then start the node with\n" +
			"serve and the same --node-id, --data-dir and --raft-addr (no --peers): it restores\n" +
			"the state and elects itself. Add the other nodes with serve --members.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "in", Usage: "the backup file", Required: true, TakesFile: true},
			&cli.StringFlag{Name: "data-dir", Usage: "the new node's data directory (empty or absent)", Required: true},
			&cli.StringFlag{Name: "node-id", Usage: "the new node's id", Required: true},
			&cli.StringFlag{Name: "raft-addr", Usage: "the Raft address the new node advertises", Required: true},
		},
		Action: func(c *cli.Context) error {
			in := c.String("in")
			f, err := os.Open(in)
			if err != nil {
				return err
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return err
			}
			bf, err := backup.Open(f, st.Size())
			if err != nil {
				return fmt.Errorf("%s: %w", in, err)
			}
			dir, err := filepath.Abs(c.String("data-dir"))
			if err != nil {
				return err
			}
			h := bf.Header
			prog := newTransfer(c.App.ErrWriter, "restored")
			err = raftnode.RestoreDataDir(dir, c.String("node-id"), c.String("raft-addr"), h.Index,
				func(w io.Writer) error { return bf.CopyState(prog.writer(w)) }, nil)
			switch {
			case errors.Is(err, backup.ErrCorrupt):
				return fmt.Errorf("%s: %w; nothing was written", in, err)
			case errors.Is(err, os.ErrExist):
				return fmt.Errorf("%s is not empty: %w", dir, err)
			case err != nil:
				return err
			}
			prog.finish()
			fmt.Fprintf(c.App.Writer, "restored index %d (state %s, taken by %s) into %s; start the node with serve --node-id %s --data-dir %s --raft-addr %s\n",
				h.Index, h.StateHash, h.Version, dir, c.String("node-id"), dir, c.String("raft-addr"))
			return nil
		},
	}
}

// transfer reports the progress of a copy on w: a line every
// transferEvery while w is a terminal, and a last line with finish.
type transfer struct {
	w     io.Writer
	verb  string
	live  bool
	now   func() time.Time
	start time.Time
	last  time.Time
	n     int64
}

// transferEvery is how often a copy reports its progress on a terminal.
const transferEvery = time.Second

func newTransfer(w io.Writer, verb string) *transfer {
	p := &transfer{w: w, verb: verb, live: isTerminal(w), now: time.Now}
	p.start = p.now()
	p.last = p.start
	return p
}

// writer returns w, counting what goes through it.
func (p *transfer) writer(w io.Writer) io.Writer {
	return writerFunc(func(b []byte) (int, error) {
		n, err := w.Write(b)
		p.add(int64(n))
		return n, err
	})
}

func (p *transfer) add(n int64) {
	p.n += n
	if !p.live {
		return
	}
	if now := p.now(); now.Sub(p.last) >= transferEvery {
		p.last = now
		fmt.Fprintf(p.w, "%s %s so far, %s/s\n", p.verb, humanBytes(p.n), humanBytes(p.rate(now)))
	}
}

// rate is the average rate since the start, in bytes per second.
func (p *transfer) rate(now time.Time) int64 {
	s := now.Sub(p.start).Seconds()
	if s <= 0 {
		return 0
	}
	return int64(float64(p.n) / s)
}

// finish writes the last line.
func (p *transfer) finish() {
	now := p.now()
	fmt.Fprintf(p.w, "%s %s in %s (%s/s)\n", p.verb, humanBytes(p.n), now.Sub(p.start).Round(time.Millisecond), humanBytes(p.rate(now)))
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// writerFunc is a function as an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
