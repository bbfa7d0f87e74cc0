package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// asMain makes the test binary run the command line when the environment
// asks for it, so that a shell can run it as raftmaster.
const asMain = "RAFTMASTER_CLI_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		os.Exit(Run(os.Args))
	}
	os.Exit(m.Run())
}

// TestCompletion: completion bash and zsh print their scripts; the binary
// lists the commands and subcommands that may follow the words typed.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "complete -o bashdefault -o default -o nospace -F _raftmaster_bash_autocomplete raftmaster\n",
		"zsh":  "compdef _raftmaster_zsh_autocomplete raftmaster\n",
	} {
		code, out, errOut := runCLI("completion", shell)
		if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "--generate-bash-completion") {
			t.Errorf("completion %s: exit %d:\n%s%s", shell, code, out, errOut)
		}
	}
	if code, _, errOut := runCLI("completion", "fish"); code == 0 || !strings.Contains(errOut, `"fish" is not a command of "raftmaster completion"`) {
		t.Errorf("completion fish: exit %d: %s", code, errOut)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--generate-bash-completion"}, []string{"cluster", "job", "backup", "completion", "serve"}},
		{[]string{"cluster", "--generate-bash-completion"}, []string{"status", "inspect", "member", "transfer"}},
		{[]string{"cluster", "member", "--generate-bash-completion"}, []string{"list", "add", "remove"}},
		{[]string{"backup", "--generate-bash-completion"}, []string{"inspect"}},
	} {
		// urfave/cli reads the word being completed from os.Args.
		saved := os.Args
		os.Args = append([]string{"raftmaster"}, tc.args...)
		code, out, errOut := runCLI(tc.args...)
		os.Args = saved
		words := strings.Fields(out)
		for _, w := range tc.want {
			if code != 0 || !contains(words, w) {
				t.Errorf("%q: exit %d, no %q in %q %s", tc.args, code, w, words, errOut)
			}
		}
	}
}

// TestBashCompletes runs the bash script in bash against this binary, as
// a user's shell does on TAB.
func TestBashCompletes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes: bash, and this binary as raftmaster")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(dir, "raftmaster")); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "raftmaster.bash")
	_, out, _ := runCLI("completion", "bash")
	if err := os.WriteFile(script, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		line string // the words typed, the last one being completed
		want string
	}{
		{"raftmaster clu", "cluster"},
		{"raftmaster cluster st", "status"},
		{"raftmaster backup ins", "inspect"},
		{"raftmaster job inspect --js", "--json"},
		{"raftmaster cluster transfer --", "--to"}, // lists the flags, and runs nothing
		{"raftmaster comp", "completion"},
	} {
		words := strings.Fields(tc.line)
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c",
			`source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($#-1)); _raftmaster_bash_autocomplete; printf '%s\n' "${COMPREPLY[@]}"`,
			"bash", script)
		cmd.Args = append(cmd.Args, words...)
		cmd.Env = append(os.Environ(), asMain+"=1", "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		got, err := cmd.CombinedOutput()
		if err != nil || !contains(strings.Fields(string(got)), tc.want) {
			t.Errorf("%q<TAB>: %v, want %q among %q", tc.line, err, tc.want, got)
		}
	}
}

func contains(words []string, w string) bool {
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}
