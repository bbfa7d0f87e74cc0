package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoad: roles are looked up by token; a bad file is refused with the
// line at fault; a reload that fails keeps the tokens in use.
func TestLoad(t *testing.T) {
	p := writeFile(t, "# comment\n\ntrainer  trainer-token-0123456789\noperator operator-token-0123456789\n")
	tk, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]Role{"trainer-token-0123456789": Trainer, "operator-token-0123456789": Operator} {
		if got, ok := tk.Role(token); !ok || got != want {
			t.Errorf("Role(%q) = %q %v, want %q", token, got, ok, want)
		}
	}
	if _, ok := tk.Role("trainer-token-012345678"); ok {
		t.Error("a prefix of a token was accepted")
	}
	if _, ok := tk.Role(""); ok {
		t.Error("an empty token was accepted")
	}
	if got := tk.Operator(); got != "operator-token-0123456789" {
		t.Errorf("Operator() = %q", got)
	}
	if !Operator.Allows(Trainer) || Trainer.Allows(Operator) || !Trainer.Allows(Trainer) {
		t.Error("role order")
	}

	for body, want := range map[string]string{
		"admin some-token-0123456789\n":                           `role "admin"`,
		"trainer short\n":                                         "at least 16",
		"trainer a-token-0123456789 extra more\n":                 "want ROLE TOKEN",
		"trainer a-token-0123456789\noperator a-token-0123456789": "given twice",
		"# nothing\n": "no tokens",
	} {
		if _, err := Load(writeFile(t, body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", body, err, want)
		}
	}

	if err := os.WriteFile(p, []byte("trainer short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tk.Reload(); err == nil {
		t.Fatal("a bad file reloaded")
	}
	if _, ok := tk.Role("trainer-token-0123456789"); !ok {
		t.Fatal("a failed reload dropped the tokens in use")
	}
}

// TestJobs: a third field scopes a trainer token to job names and
// patterns; without it a token covers every job; a bad pattern, an empty
// name or an operator line with jobs is refused with its line number.
func TestJobs(t *testing.T) {
	p := writeFile(t, "trainer all-jobs-token-0123456789\ntrainer scoped-token-0123456789 resnet,bert-*\noperator operator-token-0123456789\n")
	tk, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := tk.Lookup("all-jobs-token-0123456789")
	scoped, ok := tk.Lookup("scoped-token-0123456789")
	op, _ := tk.Lookup("operator-token-0123456789")
	if !ok || scoped.Role != Trainer || !scoped.Scoped() || all.Scoped() || op.Scoped() {
		t.Fatalf("grants: %+v %+v %+v", all, scoped, op)
	}
	for job, want := range map[string]bool{"resnet": true, "bert-large": true, "bert-": true, "resnet2": false, "bert": false, "default": false} {
		if got := scoped.Covers(job); got != want {
			t.Errorf("scoped covers %q = %v, want %v", job, got, want)
		}
		if !all.Covers(job) || !op.Covers(job) {
			t.Errorf("an unscoped token does not cover %q", job)
		}
	}
	if scoped.Owner == all.Owner || scoped.Owner != OwnerOf("scoped-token-0123456789") {
		t.Error("owner hashes")
	}
	for body, want := range map[string]string{
		"trainer ok-token-0123456789\ntrainer a-token-0123456789 job-[a\n": "line 2: jobs \"job-[a\": pattern \"job-[a\": syntax error",
		"trainer a-token-0123456789 a,,b\n":                                "line 1: jobs \"a,,b\": an empty job name",
		"operator a-token-0123456789 a\n":                                  "line 1: an operator token covers every job",
		"trainer a-token-0123456789 a b\n":                                 "line 1: want ROLE TOKEN [JOBS]",
	} {
		if _, err := Load(writeFile(t, body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", body, err, want)
		}
	}
}

// TestFileMode: a token file that its group or others may read is
// refused, naming chmod 600; 0600 and 0400 load.
func TestFileMode(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o604, 0o660, 0o666} {
		p := writeFile(t, "trainer trainer-token-0123456789\n")
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: %v, want a refusal naming chmod 600", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		p := writeFile(t, "trainer trainer-token-0123456789\n")
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err != nil {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}
}
