package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/raftmaster/raftmaster/rpc"
)

// root is the repository's root, from this package's directory.
const root = "../../.."

// TestGeneratedFilesAreCurrent fails when a committed file differs from
// what the generator writes from rpc.ErrorCodes.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := render(root, rpc.ErrorCodes)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if d := stale(f); d != "" {
			t.Errorf("%s does not match rpc.ErrorCodes: %s; run go generate ./...", f.path, d)
		}
	}
}

// stale describes how the committed copy of f differs from it, or
// returns "".
func stale(f file) string {
	old, err := os.ReadFile(filepath.Join(root, f.path))
	if err != nil {
		return err.Error()
	}
	if bytes.Equal(old, f.content) {
		return ""
	}
	a, b := strings.Split(string(old), "\n"), strings.Split(string(f.content), "\n")
	for i := range max(len(a), len(b)) {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("line %d is %q, the generator writes %q", i+1, x, y)
		}
	}
	return "they differ"
}

// A code added to the table reaches both clients, and only the generated
// section of errors.py changes.
func TestANewCodeReachesBothClients(t *testing.T) {
	codes := append(slices.Clone(rpc.ErrorCodes),
		rpc.ErrorCode{Code: "new_outcome", Name: "NewOutcome", Status: http.StatusConflict,
			Sentinel: errors.New("new outcome"), Doc: "something new happened to the request."},
		rpc.ErrorCode{Code: "new_transport", Name: "NewTransport", Status: http.StatusServiceUnavailable, Retryable: true,
			Doc: "the node did something new (503); retried."})
	files, err := render(root, codes)
	if err != nil {
		t.Fatal(err)
	}
	goSrc, pySrc := string(files[0].content), string(files[1].content)
	for _, want := range []string{
		"\t// ErrNewOutcome means something new happened to the request.\n\tErrNewOutcome = rpc.ErrNewOutcome\n",
	} {
		if !strings.Contains(goSrc, want) {
			t.Errorf("%s lacks %q", goFile, want)
		}
	}
	if strings.Contains(goSrc, "NewTransport") {
		t.Errorf("%s has a sentinel for a transport code", goFile)
	}
	for _, want := range []string{
		"class NewOutcome(RaftmasterError):\n    \"\"\"Something new happened to the request.\"\"\"\n    code = \"new_outcome\"\n\n\n# The transport's codes.",
		"class NewTransport(RaftmasterError):\n    \"\"\"The node did something new (503); retried.\"\"\"\n    code = \"new_transport\"\n    retryable = True\n\n\n_BY_CODE",
		"    \"new_outcome\": NewOutcome,\n",
		"    \"new_transport\": NewTransport,\n}",
		"    \"new_outcome\",\n))",
	} {
		if !strings.Contains(pySrc, want) {
			t.Errorf("%s lacks %q", pythonFile, want)
		}
	}
	for _, f := range files {
		if stale(f) == "" {
			t.Errorf("%s: the drift test would not notice the new code", f.path)
		}
	}
	// Outside the generated section, errors.py is as committed.
	old, err := os.ReadFile(filepath.Join(root, pythonFile))
	if err != nil {
		t.Fatal(err)
	}
	oldHead, _, _ := strings.Cut(string(old), pythonBegin)
	_, oldTail, _ := strings.Cut(string(old), pythonEnd)
	if !strings.HasPrefix(pySrc, oldHead) || !strings.HasSuffix(pySrc, oldTail) {
		t.Errorf("%s changed outside its generated section", pythonFile)
	}
}

// The generator refuses a table that would give broken or ambiguous
// code, or an errors.py without its generated section.
func TestRenderRefuses(t *testing.T) {
	ok := rpc.ErrorCode{Code: "fine", Name: "Fine", Status: http.StatusConflict, Doc: "all is fine."}
	for _, tc := range []struct {
		name string
		bad  func(c *rpc.ErrorCode)
		want string
	}{
		{"a code twice", func(c *rpc.ErrorCode) { c.Code, c.Name = rpc.CodePassBefore, "Other" }, "listed twice"},
		{"a name twice", func(c *rpc.ErrorCode) { c.Name = "PassBefore" }, "two codes"},
		{"a code in capitals", func(c *rpc.ErrorCode) { c.Code = "Fine" }, "lower-case"},
		{"a name that is no identifier", func(c *rpc.ErrorCode) { c.Name = "fine-ish" }, "identifier"},
		{"a status that is no error", func(c *rpc.ErrorCode) { c.Status = http.StatusOK }, "status"},
		{"a doc with a capital", func(c *rpc.ErrorCode) { c.Doc = "All is fine." }, "lower case"},
		{"a doc without a full stop", func(c *rpc.ErrorCode) { c.Doc = "all is fine" }, "full stop"},
		{"a doc with a quote", func(c *rpc.ErrorCode) { c.Doc = `all is "fine".` }, "double quote"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.bad(&c)
			_, err := render(root, append(slices.Clone(rpc.ErrorCodes), c))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("render: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	t.Run("errors.py without its section", func(t *testing.T) {
		dir := t.TempDir()
		py := filepath.Join(dir, pythonFile)
		if err := os.MkdirAll(filepath.Dir(py), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(py, []byte("class RaftmasterError(Exception):\n    pass\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := render(dir, rpc.ErrorCodes); err == nil || !strings.Contains(err.Error(), "generated section") {
			t.Fatalf("render: %v, want an error about the generated section", err)
		}
	})
}
