package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/raftmaster/raftmaster/internal/certs"
	"github.com/urfave/cli/v2"
)

func tlsCommand() *cli.Command {
	return &cli.Command{
		Name:  "tls",
		Usage: "TLS certificates for a cluster",
		Subcommands: []*cli.Command{{
			Name:      "gen",
			Usage:     "write a development CA, a node certificate and a client certificate",
			UsageText: "raftmaster tls gen --out certs --hosts 127.0.0.1,localhost,n1.example.com",
			Description: "Writes into --out: ca.crt and ca.key (the CA), node.crt and node.key (one\n" +
				"certificate every node uses, valid for server and client authentication and for\n" +
				"each of --hosts), client.crt and client.key (client authentication only: it cannot\n" +
				"pose as a Raft peer). Keys are ECDSA P-256, mode 0600. Start each node with\n" +
				"  serve --tls-cert out/node.crt --tls-key out/node.key --tls-ca out/ca.crt\n" +
				"and clients with --tls-ca out/ca.crt (or RAFTMASTER_TLS_CA). Run it again with\n" +
				"--force on a directory that holds the CA to issue new certificates from the same CA\n" +
				"(rotation, more hosts), then send the nodes SIGHUP. For tests and quick starts: in\n" +
				"production, use certificates from your own CA and keep its key offline.",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "out", Usage: "directory to write the files into", Required: true},
				&cli.StringFlag{Name: "hosts", Usage: "comma-separated names and IP addresses nodes are reached at (wildcards such as *.raftmaster.ns.svc.cluster.local allowed)", Required: true},
				&cli.DurationFlag{Name: "valid-for", Usage: "how long the certificates are valid", Value: 365 * 24 * time.Hour},
				&cli.StringFlag{Name: "node-ids", Usage: "comma-separated node ids (serve --node-id): each also gets node-ID.crt and node-ID.key, which name the node, so that a peer dialled as one node cannot answer with another's certificate (node.crt names no node: peers presenting it are checked by address)"},
				&cli.BoolFlag{Name: "force", Usage: "overwrite existing node and client files (a CA already in --out is kept)"},
			},
			Action: func(c *cli.Context) error {
				written, err := certs.Generate(certs.GenerateOptions{
					Dir: c.String("out"), Hosts: splitList(c.String("hosts")),
					Validity: c.Duration("valid-for"), Force: c.Bool("force"), NodeIDs: splitList(c.String("node-ids")),
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "wrote %s\n", strings.Join(written, ", "))
				return nil
			},
		}},
	}
}
