package cli

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/urfave/cli/v2"
)

// localAPI serves the HTTP API over one in-process FSM and returns its
// address.
func localAPI(t *testing.T) (*apitest.Local, string) {
	t.Helper()
	local := apitest.NewLocal()
	ts := httptest.NewServer(httpapi.NewHandler(local, httpapi.Config{}, nil))
	t.Cleanup(ts.Close)
	local.API = strings.TrimPrefix(ts.URL, "http://")
	return local, local.API
}

// TestFlagsAnywhere: a flag is accepted before the command's name, after
// it, between a group and its subcommand, and after the arguments, as
// job inspect's usage line shows.
func TestFlagsAnywhere(t *testing.T) {
	_, addr := localAPI(t)
	if code, _, errOut := runCLI("job", "create", "--addr", addr, "train"); code != 0 {
		t.Fatalf("job create: %s", errOut)
	}
	for _, args := range [][]string{
		{"job", "inspect", "train", "--json", "--addr", addr},
		{"job", "inspect", "--addr", addr, "train", "--json"},
		{"--addr", addr, "job", "inspect", "train", "--json"},
		{"--json", "job", "--addr", addr, "inspect", "train"},
		{"job", "inspect", "train", "--addr=" + addr, "-o", "json"},
		{"job", "inspect", "train", "--addr", addr, "--output=json", "--retry", "5s"},
	} {
		code, out, errOut := runCLI(args...)
		if code != 0 {
			t.Errorf("%q: exit %d: %s", args, code, errOut)
			continue
		}
		var j rpc.Job
		if err := json.Unmarshal([]byte(out), &j); err != nil || j.Name != "train" {
			t.Errorf("%q: not the job as JSON (%v):\n%s", args, err, out)
		}
	}
	// --tls-ca, defined before the command's name, is taken after it and
	// after the arguments too.
	for _, args := range [][]string{
		{"job", "inspect", "train", "--addr", addr, "--tls-ca", "/nonexistent/ca.crt"},
		{"kv", "get", "k", "--addr", addr, "--tls-ca", "/nonexistent/ca.crt"},
	} {
		if code, _, errOut := runCLI(args...); code == 0 || !strings.Contains(errOut, "--tls-ca: ") {
			t.Errorf("%q: exit %d, want the CA file refused: %s", args, code, errOut)
		}
	}
	// A flag no command on the line has is still refused, and "--" ends
	// the flags.
	if code, _, errOut := runCLI("job", "list", "--addr", addr, "--no-such-flag"); code == 0 || !strings.Contains(errOut, "no-such-flag") {
		t.Errorf("an unknown flag: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI("job", "inspect", "--addr", addr, "--", "--json"); code == 0 || !strings.Contains(errOut, "--json") {
		t.Errorf("after --: exit %d: %s", code, errOut)
	}
}

// TestNormalizeArgs checks where flags go.
func TestNormalizeArgs(t *testing.T) {
	app := NewApp(nil, nil)
	for _, tc := range []struct{ in, want string }{
		{"job inspect J --json --addr A", "job inspect --json --addr A J"},
		{"--addr A job list", "job list --addr A"},
		{"--tls-ca F job list", "job list --tls-ca F"},
		{"job list --tls-ca F --token T", "job list --tls-ca F --token T"},
		{"recordio inspect X --tls-ca F", "--tls-ca F recordio inspect X"},
		{"recordio inspect X --addr A", "recordio inspect --addr A X"},
		{"--token T job list", "job list --token T"},
		{"kv cas K --version 3 --value -1", "kv cas --version 3 --value -1 K"},
		{"job inspect -- --json", "job inspect -- --json"},
		{"--version", "--version"},
		{"help job inspect", "job inspect --help"},
		{"job help inspect", "job inspect --help"},
		{"help", "help"},
		{"job help", "job help"},
		{"job list --generate-bash-completion", "job list --generate-bash-completion"},
	} {
		got, err := normalizeArgs(app, append([]string{"raftmaster"}, strings.Fields(tc.in)...))
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if g := strings.Join(got[1:], " "); g != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, g, tc.want)
		}
	}
}

// TestTypoSuggestions: a command name that is not one answers with the
// nearest names.
func TestTypoSuggestions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"jbo", "list"}, `did you mean "job"?`},
		{[]string{"job", "lst"}, `did you mean "list"?`},
		{[]string{"cluster", "inspct"}, `did you mean "inspect"?`},
		{[]string{"clustr", "status"}, `did you mean "cluster"?`},
		{[]string{"zzzzzz"}, "the commands are "},
		{[]string{"help", "jbo"}, `did you mean "job"?`},
		{[]string{"help", "cluster", "stats"}, `did you mean "status"?`},
	} {
		code, _, errOut := runCLI(tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "No help topic") {
			t.Errorf("%q: exit %d, want %q in:\n%s", tc.args, code, tc.want, errOut)
		}
	}
	// A mistyped flag is answered with the nearest flag.
	if code, out, errOut := runCLI("job", "list", "--jsn"); code == 0 || !strings.Contains(strings.ToLower(out+errOut), `did you mean "--json"?`) {
		t.Errorf("--jsn: exit %d: %s%s", code, out, errOut)
	}
}

// TestReadCommandsPrintJSON: every command that reads takes --json and
// -o json.
func TestReadCommandsPrintJSON(t *testing.T) {
	app := NewApp(nil, nil)
	for _, path := range [][]string{
		{"cluster", "inspect"}, {"cluster", "status"}, {"cluster", "member", "list"}, {"job", "list"}, {"job", "inspect"}, {"limits", "get"},
		{"kv", "get"}, {"session", "list"}, {"health"}, {"backup", "inspect"}, {"recordio", "inspect"},
	} {
		cmds := app.Commands
		var cmd *cli.Command
		for _, name := range path {
			if cmd = findCommand(cmds, name); cmd == nil {
				break
			}
			cmds = cmd.Subcommands
		}
		if cmd == nil || !hasFlag(cmd.Flags, "json") || !hasFlag(cmd.Flags, "output") || !hasFlag(cmd.Flags, "o") {
			t.Errorf("%q: no such command, or without --json and -o", path)
		}
	}
	_, addr := localAPI(t)
	code, out, errOut := runCLI("health", "--addr", addr, "-o", "json")
	var h healthAnswer
	if err := json.Unmarshal([]byte(out), &h); code != 0 || err != nil || !h.Ready || h.Addr != addr {
		t.Errorf("health -o json: exit %d, %v: %s%s", code, err, out, errOut)
	}
	if code, _, errOut := runCLI("job", "list", "--addr", addr, "-o", "yaml"); code == 0 || !strings.Contains(errOut, `-o "yaml": want text or json`) {
		t.Errorf("-o yaml: exit %d: %s", code, errOut)
	}
}
