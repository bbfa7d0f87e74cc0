package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/rpc"
)

// rpcDir is package rpc's directory, and committed its document.
const (
	rpcDir    = "../.."
	committed = "../../openapi.json"
)

// TestOpenAPIIsCurrent fails when rpc/openapi.json is not what the
// generator writes from the package as it is.
func TestOpenAPIIsCurrent(t *testing.T) {
	got, err := generate(rpcDir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(committed)
	if err != nil {
		t.Fatalf("%v; run go generate ./...", err)
	}
	if d := firstDifference(want, got); d != "" {
		t.Fatalf("rpc/openapi.json does not match what Endpoints and the Go types say.\nFirst difference: %s\n"+
			"If the change to the wire contract is intended, run go generate ./...", d)
	}
}

// A changed doc comment is a changed document, and the drift test names
// where.
func TestACommentChangeIsADocumentChange(t *testing.T) {
	dir := copyRPC(t)
	edit(t, filepath.Join(dir, "errors.go"), "// ErrPassBefore means the pass asked for has already ended.",
		"// ErrPassBefore means the pass asked for is over.")
	got, err := generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	d := firstDifference(want, got)
	if !strings.Contains(d, "components.schemas.Error.properties.code.description") || !strings.Contains(d, "is over") {
		t.Fatalf("first difference: %q, want the code's description with the new comment", d)
	}
}

// The generator refuses a package whose declarations and tables
// disagree, naming what is missing.
func TestGenerateRefusesADeclarationWithoutItsEntry(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"a path without an endpoint", `const PathNowhere = "/v1/nowhere"`, "PathNowhere"},
		{"a code without an entry", `const CodeNew = "new_code"`, "CodeNew"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyRPC(t)
			if err := os.WriteFile(filepath.Join(dir, "extra.go"), []byte("package rpc\n\n"+tc.src+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := generate(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("generate: %v, want an error naming %s", err, tc.want)
			}
		})
	}
	t.Run("a sentinel not named after its entry", func(t *testing.T) {
		dir := copyRPC(t)
		edit(t, filepath.Join(dir, "errors.go"), "\tErrPassBefore = errors.New(", "\tErrPassBeforeNow = errors.New(")
		if _, err := generate(dir); err == nil || !strings.Contains(err.Error(), "ErrPassBefore") {
			t.Fatalf("generate: %v, want an error naming ErrPassBefore", err)
		}
	})
}

// TestDurationPattern checks that the pattern given for durations matches
// what Duration writes, and only strings that it reads.
func TestDurationPattern(t *testing.T) {
	re := regexp.MustCompile(durationPattern)
	for _, d := range []time.Duration{0, 1, time.Microsecond, 1500 * time.Millisecond, 90 * time.Second,
		2*time.Hour + 45*time.Minute + 500*time.Millisecond, -3 * time.Second, 1<<63 - 1, -1 << 63} {
		b, err := json.Marshal(rpc.Duration(d))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := strconv.Unquote(string(b))
		if !re.MatchString(s) {
			t.Errorf("the pattern does not match %q", s)
		}
	}
	for _, s := range []string{"0", "30s", "1.5h", ".5s", "1.s", "+2m", "1h2m3s4ms5us6ns", "3µs"} {
		if !re.MatchString(s) {
			t.Errorf("the pattern does not match %q", s)
		}
		if _, err := time.ParseDuration(s); err != nil {
			t.Errorf("%q matches the pattern but does not parse: %v", s, err)
		}
	}
	for _, s := range []string{"", "30", "1d", "s", ".s", "1 s", "-", "1s2", "0s "} {
		if re.MatchString(s) {
			t.Errorf("the pattern matches %q", s)
		}
		if _, err := time.ParseDuration(s); err == nil {
			t.Errorf("%q parses but the pattern refuses it", s)
		}
	}
}

// TestRequestIDPattern checks the request id pattern against a real one.
func TestRequestIDPattern(t *testing.T) {
	re := regexp.MustCompile(requestIDPattern)
	if id := uuid.NewString() + "/17"; !re.MatchString(id) {
		t.Errorf("the pattern does not match %q", id)
	}
	for _, s := range []string{"", "x/1", uuid.NewString(), uuid.NewString() + "/", uuid.NewString() + "/-1"} {
		if re.MatchString(s) {
			t.Errorf("the pattern matches %q", s)
		}
	}
}

// copyRPC copies package rpc's source (without tests) to a temporary
// directory.
func copyRPC(t *testing.T) string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(rpcDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(n)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// edit replaces the one occurrence of old in file by new.
func edit(t *testing.T, file, old, new string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), old); n != 1 {
		t.Fatalf("%s holds %q %d times, want once", file, old, n)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// firstDifference describes the first place where the committed document
// (file) and the generated one differ, or returns "".
func firstDifference(file, gen []byte) string {
	var f, g any
	if err := json.Unmarshal(file, &f); err != nil {
		return fmt.Sprintf("the committed document is not valid JSON: %v", err)
	}
	if err := json.Unmarshal(gen, &g); err != nil {
		return fmt.Sprintf("the generated document is not valid JSON: %v", err)
	}
	if d := diffJSON("", f, g); d != "" {
		return d
	}
	if bytes.Equal(file, gen) {
		return ""
	}
	// Same content, other layout: name the first line that differs.
	fl, gl := strings.Split(string(file), "\n"), strings.Split(string(gen), "\n")
	for i := range max(len(fl), len(gl)) {
		var a, b string
		if i < len(fl) {
			a = fl[i]
		}
		if i < len(gl) {
			b = gl[i]
		}
		if a != b {
			return fmt.Sprintf("the same content laid out differently: line %d is %q, the generator writes %q", i+1, a, b)
		}
	}
	return "the same content laid out differently"
}

// diffJSON compares two decoded JSON values, objects key by key in sorted
// order.
func diffJSON(at string, file, gen any) string {
	switch f := file.(type) {
	case map[string]any:
		g, ok := gen.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(f)+len(g))
		for k := range f {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := f[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			fv, inFile := f[k]
			gv, inGen := g[k]
			switch {
			case !inGen:
				return fmt.Sprintf("at %s: the document has %s, which the Go code no longer gives", orRoot(jsonPath(at, k)), short(fv))
			case !inFile:
				return fmt.Sprintf("at %s: the Go code gives %s, which the document lacks", orRoot(jsonPath(at, k)), short(gv))
			}
			if d := diffJSON(jsonPath(at, k), fv, gv); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := gen.([]any)
		if !ok {
			break
		}
		for i := range min(len(f), len(g)) {
			if d := diffJSON(fmt.Sprintf("%s[%d]", at, i), f[i], g[i]); d != "" {
				return d
			}
		}
		if len(f) != len(g) {
			return fmt.Sprintf("at %s: the document has %d elements where the Go code gives %d", orRoot(at), len(f), len(g))
		}
		return ""
	}
	if reflect.DeepEqual(file, gen) {
		return ""
	}
	if fs, ok := file.(string); ok {
		if gs, ok := gen.(string); ok {
			// Long texts: show where they part.
			i := 0
			for i < len(fs) && i < len(gs) && fs[i] == gs[i] {
				i++
			}
			from := max(0, i-30)
			return fmt.Sprintf("at %s, from byte %d: the document has %s where the Go code gives %s",
				orRoot(at), i, short(fs[from:]), short(gs[from:]))
		}
	}
	return fmt.Sprintf("at %s: the document has %s where the Go code gives %s", orRoot(at), short(file), short(gen))
}

// plainKey matches the keys that jsonPath writes as .key.
var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// jsonPath appends key k to path at: .k for a plain name, else ["k"].
func jsonPath(at, k string) string {
	if plainKey.MatchString(k) {
		if at == "" {
			return k
		}
		return at + "." + k
	}
	return at + "[" + strconv.Quote(k) + "]"
}

func orRoot(at string) string {
	if at == "" {
		return "the top level"
	}
	return at
}

// short is v as JSON, cut to a readable length.
func short(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	b := bytes.TrimSpace(buf.Bytes())
	if len(b) > 120 {
		return string(b[:120]) + "..."
	}
	return string(b)
}
