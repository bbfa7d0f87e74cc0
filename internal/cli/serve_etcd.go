package cli

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/internal/etcdmaster"
	"github.com/raftmaster/raftmaster/internal/replica"
	"github.com/raftmaster/raftmaster/store"
	"github.com/raftmaster/raftmaster/store/etcdkeys"
	"github.com/urfave/cli/v2"
)

// etcdConfig reads the flags of the etcd backend.
func etcdConfig(c *cli.Context, logger hclog.Logger) (replica.Etcd, error) {
	endpoints := splitList(c.String("etcd-endpoints"))
	if len(endpoints) == 0 {
		return replica.Etcd{}, fmt.Errorf("--backend etcd needs --etcd-endpoints")
	}
	for _, f := range []string{"peers", "members", "test-raft-dial", "bootstrap-expect"} {
		if c.IsSet(f) {
			return replica.Etcd{}, fmt.Errorf("--%s is for the raft backend; the etcd backend elects its master through etcd", f)
		}
	}
	ttl := c.Duration("etcd-ttl")
	if ttl < time.Second || ttl%time.Second != 0 {
		return replica.Etcd{}, fmt.Errorf("--etcd-ttl %v: want whole seconds, at least 1s", ttl)
	}
	prefix := strings.TrimSuffix(c.String("etcd-prefix"), "/")
	if !strings.HasPrefix(prefix, "/") {
		return replica.Etcd{}, fmt.Errorf("--etcd-prefix %q: want an absolute key such as /master", c.String("etcd-prefix"))
	}
	keys := etcdkeys.Under(prefix)
	maxState := c.Int("etcd-max-state-bytes")
	if maxState < 2*etcdmaster.StateHeadroom {
		return replica.Etcd{}, fmt.Errorf("--etcd-max-state-bytes %d: want at least %d", maxState, 2*etcdmaster.StateHeadroom)
	}
	limits, err := jobLimits(c)
	if err != nil {
		return replica.Etcd{}, err
	}
	auth, err := etcdAuth(c)
	if err != nil {
		return replica.Etcd{}, err
	}
	apiAdvertise, err := advertised(c.String("advertise-addr"), c.String("http-addr"))
	if err != nil {
		return replica.Etcd{}, fmt.Errorf("--advertise-addr: %w", err)
	}
	return replica.Etcd{Master: etcdmaster.Config{
		Limits: limits,
		ID:     c.String("node-id"), APIAddr: apiAdvertise,
		Store: store.EtcdConfig{
			Endpoints: endpoints, TTL: ttl, MaxStateBytes: maxState, Auth: auth,
			LockPath: keys.Lock, AddrPath: keys.Addr, StatePath: keys.State,
		},
		MembersPath:   keys.Members,
		FailoverGrace: c.Duration("failover-grace"), Clock: testClock(c, logger), Logger: logger,
	}}, nil
}

// etcdPasswordEnv holds the password of --etcd-user, unless
// --etcd-password-file names a file that does; a password is never a
// flag's value, which any user of the host could read.
const etcdPasswordEnv = envPrefix + "ETCD_PASSWORD"

// etcdFlags are serve's flags for reaching an etcd that requires TLS or
// authentication.
func etcdFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "etcd-cacert", Usage: "PEM CA certificate(s) that sign etcd's server certificate: the node talks to etcd over TLS (give https:// --etcd-endpoints) (etcd backend)", EnvVars: env("etcd-cacert"), TakesFile: true},
		&cli.StringFlag{Name: "etcd-cert", Usage: "PEM client certificate the node presents to etcd (etcd's --client-cert-auth); needs --etcd-key (etcd backend)", EnvVars: env("etcd-cert"), TakesFile: true},
		&cli.StringFlag{Name: "etcd-key", Usage: "the PEM private key of --etcd-cert (etcd backend)", EnvVars: env("etcd-key"), TakesFile: true},
		&cli.StringFlag{Name: "etcd-user", Usage: "etcd user the node logs in as (etcd's auth enable); its password comes from $" + etcdPasswordEnv + " or --etcd-password-file (etcd backend)", EnvVars: env("etcd-user")},
		&cli.StringFlag{Name: "etcd-password-file", Usage: "file holding the password of --etcd-user (etcd backend)", EnvVars: env("etcd-password-file"), TakesFile: true},
	}
}

// etcdAuth reads the flags that reach an etcd with TLS or authentication.
func etcdAuth(c *cli.Context) (store.EtcdAuth, error) {
	var auth store.EtcdAuth
	ca, cert, key := c.String("etcd-cacert"), c.String("etcd-cert"), c.String("etcd-key")
	if (cert == "") != (key == "") {
		return auth, fmt.Errorf("--etcd-cert and --etcd-key go together")
	}
	if ca != "" || cert != "" {
		conf := &tls.Config{MinVersion: tls.VersionTLS12}
		if ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				return auth, fmt.Errorf("--etcd-cacert: %w", err)
			}
			conf.RootCAs = x509.NewCertPool()
			if !conf.RootCAs.AppendCertsFromPEM(pem) {
				return auth, fmt.Errorf("--etcd-cacert %s: no PEM certificate in it", ca)
			}
		}
		if cert != "" {
			pair, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				return auth, fmt.Errorf("--etcd-cert, --etcd-key: %w", err)
			}
			conf.Certificates = []tls.Certificate{pair}
		}
		auth.TLS = conf
	}
	user, file := c.String("etcd-user"), c.String("etcd-password-file")
	if user == "" {
		if file != "" {
			return auth, fmt.Errorf("--etcd-password-file needs --etcd-user")
		}
		return auth, nil
	}
	password := os.Getenv(etcdPasswordEnv)
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return auth, fmt.Errorf("--etcd-password-file: %w", err)
		}
		password = strings.TrimRight(string(b), "\r\n")
	}
	if password == "" {
		return auth, fmt.Errorf("--etcd-user %s needs a password: set $%s or --etcd-password-file", user, etcdPasswordEnv)
	}
	auth.Username, auth.Password = user, password
	return auth, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
