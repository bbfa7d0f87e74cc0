package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/raftmaster/raftmaster/internal/certs"
	"github.com/urfave/cli/v2"
)

func keygenCommand() *cli.Command {
	return &cli.Command{
		Name:      "keygen",
		Usage:     "write a new cluster key, the secret that secures Raft between the nodes",
		UsageText: "raftmaster keygen --out cluster.key",
		Description: "Writes 32 random bytes, hex-encoded, to --out with mode 0600. Give every node of a\n" +
			"cluster the same file with serve --cluster-key-file: each derives the cluster's CA from\n" +
			"it and issues itself a certificate for its node id, and Raft runs over mutual TLS. Keep\n" +
			"the file as secret as a CA's key: anyone who holds it can take part in the cluster's Raft. A new\n" +
			"key takes effect when every node restarts with it; nodes of different keys refuse each\n" +
			"other.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "file to write the key into", Required: true, TakesFile: true},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing file"},
			&cli.BoolFlag{Name: "keep", Usage: "leave an existing file as it is and succeed (for a deployment's first-start step)"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("keep") && !c.Bool("force") {
				if _, err := certs.ReadClusterKey(c.String("out")); err == nil {
					fmt.Fprintf(c.App.Writer, "kept the cluster key in %s\n", c.String("out"))
					return nil
				} else if !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
			if err := certs.WriteClusterKey(c.String("out"), c.Bool("force")); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "wrote %s\n", c.String("out"))
			return nil
		},
	}
}
