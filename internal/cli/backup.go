package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/backup"
	"github.com/raftmaster/raftmaster/raftnode"
	"github.com/urfave/cli/v2"
)

func backupCommand() *cli.Command {
	return &cli.Command{
		Name:      "backup",
		Usage:     "take an online, consistent backup of the whole state from the leader",
		UsageText: "raftmaster backup --addr 127.0.0.1:8001 --out raftmaster-backup.bin",
		Description: "The leader answers after a read barrier, so the backup holds every write\n" +
			"acknowledged before it; the cluster goes on serving meanwhile. The file holds the\n" +
			"state, its index, its SHA-256 and the version of the node that took it.\n" +
			"raftmaster restore seeds a new cluster from it.",
		Flags: []cli.Flag{addrFlag(), retryFlag(),
			&cli.StringFlag{Name: "out", Usage: "the backup file to write", Required: true, TakesFile: true},
		},
		Action: func(c *cli.Context) error {
			return withClient(c, func(cl *client.Client) error {
				b, err := cl.Backup()
				if err != nil {
					return err
				}
				out := c.String("out")
				tmp := out + ".tmp"
				f, err := os.Create(tmp)
				if err != nil {
					return err
				}
				h, err := backup.Write(f, b.Version, b.Index, b.Snapshot)
				if err == nil {
					err = f.Sync()
				}
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err == nil && h.StateHash != b.StateHash {
					err = fmt.Errorf("the backup's hash %s is not the leader's %s", h.StateHash, b.StateHash)
				}
				if err == nil {
					err = os.Rename(tmp, out)
				}
				if err != nil {
					os.Remove(tmp)
					return err
				}
				fmt.Fprintf(c.App.Writer, "backup of index %d (state %s, %d bytes) written to %s\n", h.Index, h.StateHash, h.Size, out)
				return nil
			})
		},
	}
}

func restoreCommand() *cli.Command {
	return &cli.Command{
		Name:      "restore",
		Usage:     "seed the data directory of a new cluster's first node from a backup",
		UsageText: "raftmaster restore --in raftmaster-backup.bin --data-dir /var/lib/raftmaster --node-id n1 --raft-addr 10.0.0.1:7001",
		Description: "Checks the whole file first (format, length, hash, and that the state restores),\n" +
			"and refuses a corrupt or truncated one, or a directory that already holds Raft\n" +
			"state, writing nothing. Then start the node with serve and the same --node-id,\n" +
			"--data-dir and --raft-addr (no --peers): it restores the state and elects itself.\n" +
			"Add the other nodes with serve --join.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "in", Usage: "the backup file", Required: true, TakesFile: true},
			&cli.StringFlag{Name: "data-dir", Usage: "the new node's data directory (empty or absent)", Required: true},
			&cli.StringFlag{Name: "node-id", Usage: "the new node's id", Required: true},
			&cli.StringFlag{Name: "raft-addr", Usage: "the Raft address the new node advertises", Required: true},
		},
		Action: func(c *cli.Context) error {
			f, err := os.Open(c.String("in"))
			if err != nil {
				return err
			}
			defer f.Close()
			h, snapshot, err := backup.Read(f)
			if err != nil {
				return fmt.Errorf("%s: %w", c.String("in"), err)
			}
			dir, err := filepath.Abs(c.String("data-dir"))
			if err != nil {
				return err
			}
			if err := raftnode.Seed(dir, c.String("node-id"), c.String("raft-addr"), h.Index, snapshot, nil); err != nil {
				if errors.Is(err, os.ErrExist) {
					return fmt.Errorf("%s is not empty: %w", dir, err)
				}
				return err
			}
			fmt.Fprintf(c.App.Writer, "restored index %d (state %s, taken by %s) into %s; start the node with serve --node-id %s --data-dir %s --raft-addr %s\n",
				h.Index, h.StateHash, h.Version, dir, c.String("node-id"), dir, c.String("raft-addr"))
			return nil
		},
	}
}
