package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/internal/quota"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/urfave/cli/v2"
)

// TestTokenSources: the CLI takes its bearer token from --token before or
// after the command's name, from --token-file or RAFTMASTER_TOKEN_FILE,
// or from RAFTMASTER_TOKEN, so that no command line needs to carry it; a
// token file of serve's format gives its first operator token.
func TestTokenSources(t *testing.T) {
	local := apitest.NewLocal()
	h := httpapi.NewHandler(local, httpapi.Config{}, nil)
	var mu sync.Mutex
	var seen []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get(rpc.HeaderAuthorization))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	local.API = strings.TrimPrefix(ts.URL, "http://")
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from-a-file-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"before the command", []string{"--token", "before-0123456789", "job", "list"}, nil, "before-0123456789"},
		{"after the command", []string{"job", "list", "--token", "after-0123456789"}, nil, "after-0123456789"},
		{"a token file", []string{"job", "list", "--token-file", file}, nil, "from-a-file-0123456789"},
		{"a token file before", []string{"--token-file", file, "job", "list"}, nil, "from-a-file-0123456789"},
		{"RAFTMASTER_TOKEN_FILE", []string{"job", "list"}, map[string]string{"RAFTMASTER_TOKEN_FILE": file}, "from-a-file-0123456789"},
		{"RAFTMASTER_TOKEN", []string{"job", "list"}, map[string]string{"RAFTMASTER_TOKEN": "env-0123456789"}, "env-0123456789"},
		{"--token over the environment", []string{"job", "list", "--token", "flag-0123456789"}, map[string]string{"RAFTMASTER_TOKEN_FILE": file}, "flag-0123456789"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			mu.Lock()
			seen = nil
			mu.Unlock()
			args := append([]string{"raftmaster"}, tc.args...)
			args = append(args, "--addr", local.API)
			var out, errOut bytes.Buffer
			if code := RunWith(args, &out, &errOut); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) == 0 || seen[0] != "Bearer "+tc.want {
				t.Fatalf("the server saw %q, want the token %q", seen, tc.want)
			}
		})
	}
	for body, want := range map[string]string{
		"# ROLE TOKEN\ntrainer trainer-token-0123\noperator operator-token-0123 \n": "operator-token-0123",
		"  plain-token-0123  \nignored\n":                                           "plain-token-0123",
		"# ROLE TOKEN\ntrainer trainer-token-0123\n":                                "",
	} {
		if got := tokenIn(body); got != want {
			t.Errorf("the token of %q: %q, want %q", body, got, want)
		}
	}
	var out, errOut bytes.Buffer
	if code := RunWith([]string{"raftmaster", "job", "list", "--addr", local.API, "--token-file", file + ".missing"}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "--token-file") {
		t.Fatalf("a missing token file: exit %d, %q", code, errOut.String())
	}
}

// TestQuotaFlags: with tokens the quotas default to the documented rates;
// without tokens there is none unless one is given; a rate alone scales
// the burst with it; 0 turns a quota off.
func TestQuotaFlags(t *testing.T) {
	run := func(tokens bool, args ...string) (w, c quota.Rate) {
		t.Helper()
		app := &cli.App{Flags: []cli.Flag{
			&cli.Float64Flag{Name: "write-quota"}, &cli.Float64Flag{Name: "write-burst"},
			&cli.Float64Flag{Name: "client-quota"}, &cli.Float64Flag{Name: "client-burst"},
		}, Action: func(ctx *cli.Context) error {
			w = quotaFlags(ctx, "write", tokens, httpapi.DefaultWriteQuota)
			c = quotaFlags(ctx, "client", tokens, httpapi.DefaultClientQuota)
			return nil
		}}
		if err := app.Run(append([]string{"serve"}, args...)); err != nil {
			t.Fatal(err)
		}
		return w, c
	}
	if w, c := run(true); w != (quota.Rate{PerSecond: 10000, Burst: 100000}) || c != (quota.Rate{PerSecond: 2048, Burst: 131072}) {
		t.Errorf("with tokens: %+v %+v", w, c)
	}
	if w, c := run(false); w.On() || c.On() {
		t.Errorf("without tokens: %+v %+v", w, c)
	}
	if w, _ := run(false, "--write-quota", "50"); w != (quota.Rate{PerSecond: 50, Burst: 500}) {
		t.Errorf("--write-quota 50 without tokens: %+v", w)
	}
	if w, _ := run(true, "--write-quota", "0"); w.On() {
		t.Errorf("--write-quota 0: %+v", w)
	}
	if _, c := run(true, "--client-burst", "10"); c != (quota.Rate{PerSecond: 2048, Burst: 10}) {
		t.Errorf("--client-burst 10: %+v", c)
	}
}
