package cli

import (
	"fmt"
	"strings"

	"github.com/raftmaster/raftmaster/raftnode"
	"github.com/urfave/cli/v2"
)

func recoverCommand() *cli.Command {
	return &cli.Command{
		Name:  "recover",
		Usage: "rewrite a stopped node's cluster membership after the majority is lost for good",
		UsageText: "raftmaster recover --data-dir /var/lib/raftmaster --peers n1=10.0.0.1:7001\n" +
			"raftmaster recover --data-dir DIR --peers n1=10.0.0.1:7001,n3=10.0.0.3:7001   # on each survivor, the same --peers",
		Description: "For a cluster that lost a majority of its nodes for good, so that it can elect no\n" +
			"leader. Stop every survivor, run this on each with the same --peers (the survivors\n" +
			"only), then start them with their usual flags: they elect a leader among themselves\n" +
			"and go on with every entry they hold. Entries only the lost nodes held are gone, so\n" +
			"include the most up-to-date survivors (raftmaster cluster inspect showed their\n" +
			"indexes). The node must be stopped: its log store is locked while it runs. Add new\n" +
			"nodes afterwards with raftmaster cluster member add or serve --members.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data-dir", Usage: "the stopped node's data directory", Required: true},
			&cli.StringFlag{Name: "peers", Usage: "the new configuration, name=raftaddr,... (the survivors; a name or a server id as cluster member list shows it)", Required: true},
			&cli.StringFlag{Name: "log-level", Usage: "trace, debug, info, warn or error", Value: "warn"},
			&cli.BoolFlag{Name: "log-json", Usage: "log in JSON"},
		},
		Action: func(c *cli.Context) error {
			peers, err := raftnode.ParsePeers(c.String("peers"))
			if err != nil {
				return fmt.Errorf("--peers: %w", err)
			}
			rec, err := raftnode.Recover(c.String("data-dir"), peers, newLogger(c, "recover"))
			if err != nil {
				return err
			}
			ids := make([]string, len(rec.Peers))
			for i, p := range rec.Peers {
				ids[i] = p.ID + "=" + p.RaftAddr
			}
			fmt.Fprintf(c.App.Writer, "recovered %s (server %s): its cluster is now %s\n", c.String("data-dir"), rec.ServerID, strings.Join(ids, ","))
			fmt.Fprintf(c.App.Writer, "kept every entry this node holds, up to index %d (term %d); an entry that only the lost nodes held, "+
				"acknowledged or not, is lost.\nStart the node with its usual flags.\n", rec.LastIndex, rec.LastTerm)
			return nil
		},
	}
}
