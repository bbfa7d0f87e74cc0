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
		"trainer a-token-0123456789 extra\n":                      "want ROLE TOKEN",
		"trainer a-token-0123456789\noperator a-token-0123456789": "given twice",
		"# nothing\n":                                             "no tokens",
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
