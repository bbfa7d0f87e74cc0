package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/recordio"
)

// run runs the command line and returns its exit code and outputs.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := RunWith(append([]string{"raftmaster", "recordio"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// writeLines writes n numbered lines, every seventh one empty, and returns
// them.
func writeLines(t *testing.T, path string, first, n int) []string {
	t.Helper()
	var lines []string
	for i := first; i < first+n; i++ {
		l := fmt.Sprintf("record %d %s", i, strings.Repeat("x", i%50))
		if i%7 == 0 {
			l = ""
		}
		lines = append(lines, l)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return lines
}

func inspectJSON(t *testing.T, files ...string) []fileReport {
	t.Helper()
	code, out, errOut := run(t, append([]string{"inspect", "--json"}, files...)...)
	if code != 0 {
		t.Fatalf("inspect exited %d: %s", code, errOut)
	}
	var reps []fileReport
	if err := json.Unmarshal([]byte(out), &reps); err != nil {
		t.Fatalf("inspect --json printed %q: %v", out, err)
	}
	return reps
}

func TestRecordioPackInspect(t *testing.T) {
	for _, comp := range []string{"none", "snappy", "gzip"} {
		t.Run(comp, func(t *testing.T) {
			dir := t.TempDir()
			in1, in2 := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
			want := append(writeLines(t, in1, 0, 23), writeLines(t, in2, 23, 10)...)
			pattern := filepath.Join(dir, "out", "nested", "train-%03d.recordio")

			code, out, errOut := run(t, "pack", "--out", pattern, "--records-per-file", "10",
				"--compressor", comp, "--max-chunk-size", "64", in1, in2)
			if code != 0 {
				t.Fatalf("pack exited %d: %s", code, errOut)
			}
			files := strings.Fields(out)
			var wantFiles []string
			for i := range 4 {
				wantFiles = append(wantFiles, fmt.Sprintf(pattern, i))
			}
			if !slices.Equal(files, wantFiles) {
				t.Fatalf("pack printed %q, want %q", files, wantFiles)
			}
			if !strings.Contains(errOut, "packed 33 records") {
				t.Errorf("no summary on stderr: %q", errOut)
			}

			reps := inspectJSON(t, files...)
			if len(reps) != 4 {
				t.Fatalf("inspect described %d files, want 4", len(reps))
			}
			for i, r := range reps {
				wantRecords := 10
				if i == 3 {
					wantRecords = 3
				}
				st, _ := os.Stat(files[i])
				if r.File != files[i] || r.Records != wantRecords || r.Chunks < 2 ||
					!slices.Equal(r.Compressors, []string{comp}) || r.FileSize != st.Size() ||
					r.CompressedBytes+int64(20*r.Chunks) != r.FileSize || r.UncompressedBytes != r.RecordBytes+int64(4*r.Records) ||
					r.Error != "" {
					t.Errorf("file %d: %+v", i, r)
				}
				if comp == "none" && r.CompressedBytes != r.UncompressedBytes {
					t.Errorf("file %d: uncompressed chunks of %d bytes decompress to %d", i, r.CompressedBytes, r.UncompressedBytes)
				}
			}

			s, err := recordio.NewScanner(filepath.Join(dir, "out", "nested", "*.recordio"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var got []string
			for s.Scan() {
				got = append(got, string(s.Record()))
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("files hold %q, want %q", got, want)
			}
			if tmp, _ := filepath.Glob(filepath.Join(dir, "out", "nested", ".*")); len(tmp) != 0 {
				t.Fatalf("temporary files left: %q", tmp)
			}
		})
	}
}

func TestRecordioPackStdin(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte("one\n\nthree\nfour without newline"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = saved }()

	code, out, errOut := run(t, "pack", "--quiet", "--out", filepath.Join(dir, "data.recordio"), "-n", "100")
	if code != 0 {
		t.Fatalf("pack exited %d: %s", code, errOut)
	}
	if errOut != "" {
		t.Errorf("--quiet printed %q", errOut)
	}
	want := filepath.Join(dir, "data-00000.recordio")
	if strings.TrimSpace(out) != want {
		t.Fatalf("pack printed %q, want %q", out, want)
	}
	reps := inspectJSON(t, want)
	if reps[0].Records != 4 || !slices.Equal(reps[0].Compressors, []string{"snappy"}) {
		t.Fatalf("%+v, want 4 snappy records", reps[0])
	}
}

func TestRecordioPackBadFlags(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	writeLines(t, in, 0, 3)
	out := filepath.Join(dir, "x-%d.recordio")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", out, "-n", "0", in}, "--records-per-file must be positive"},
		{[]string{"--out", out, "-n", "-3", in}, "--records-per-file must be positive"},
		{[]string{"--out", out, "-n", "5", "--compressor", "lz4", in}, `unknown compressor "lz4"`},
		{[]string{"--out", out, "-n", "5", "--max-chunk-size", "0", in}, "--max-chunk-size must be positive"},
		{[]string{"--out", filepath.Join(dir, "%d-%d"), "-n", "5", in}, "has 2 verbs"},
		{[]string{"--out", filepath.Join(dir, "%s.recordio"), "-n", "5", in}, "want one integer verb"},
		{[]string{"-n", "5", in}, "out"},
		{[]string{"--out", out, "-n", "5", filepath.Join(dir, "missing.txt")}, "missing.txt"},
	} {
		code, _, errOut := run(t, append([]string{"pack"}, tt.args...)...)
		if code == 0 || !strings.Contains(errOut, tt.want) {
			t.Errorf("pack %q: exit %d, stderr %q; want an error containing %q", tt.args, code, errOut, tt.want)
		}
	}
}

func TestOutputPattern(t *testing.T) {
	for in, want := range map[string]string{
		"data/train-%05d.recordio": "data/train-%05d.recordio",
		"data/train.recordio":      "data/train-%05d.recordio",
		"data/train":               "data/train-%05d",
		"a.b/train":                "a.b/train-%05d",
		"100%%-%x.rio":             "100%%-%x.rio",
	} {
		if got, err := outputPattern(in); err != nil || got != want {
			t.Errorf("outputPattern(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestRecordioInspectTable(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	writeLines(t, in, 0, 30)
	code, out, errOut := run(t, "pack", "-q", "--out", filepath.Join(dir, "t.recordio"), "-n", "20", "-c", "gzip", in)
	if code != 0 {
		t.Fatalf("pack exited %d: %s", code, errOut)
	}
	code, out, errOut = run(t, append([]string{"inspect"}, strings.Fields(out)...)...)
	if code != 0 {
		t.Fatalf("inspect exited %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "FILE ") || !strings.HasPrefix(lines[3], "TOTAL (2 files)") {
		t.Fatalf("table:\n%s", out)
	}
	col := strings.Index(lines[0], "RECORDS")
	for _, l := range lines[1:] {
		if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
			t.Fatalf("RECORDS column not aligned:\n%s", out)
		}
	}
	if f := strings.Fields(lines[1]); f[2] != "20" || f[3] != "gzip" {
		t.Fatalf("first row %q", lines[1])
	}
}

func TestRecordioInspectCorrupt(t *testing.T) {
	corrupt, err := filepath.Glob(filepath.Join("..", "..", "recordio", "testdata", "corrupt", "*.recordio"))
	if err != nil || len(corrupt) == 0 {
		t.Fatalf("no corrupt test files: %v", err)
	}
	good := filepath.Join("..", "..", "recordio", "testdata", "none-multi.recordio")
	for _, path := range corrupt {
		t.Run(filepath.Base(path), func(t *testing.T) {
			code, out, errOut := run(t, "inspect", good, path)
			if code == 0 {
				t.Fatalf("inspect of %s exited 0", path)
			}
			if !strings.Contains(errOut, path) || !strings.Contains(errOut, "at offset") {
				t.Errorf("stderr %q does not name the file and offset", errOut)
			}
			if !strings.Contains(out, good) || strings.Contains(out, path) {
				t.Errorf("table should list only the good file:\n%s", out)
			}

			code, out, _ = run(t, "inspect", "--json", path)
			var reps []fileReport
			if code == 0 || json.Unmarshal([]byte(out), &reps) != nil || len(reps) != 1 ||
				!strings.Contains(reps[0].Error, "at offset") {
				t.Errorf("inspect --json: exit %d, %s", code, out)
			}
		})
	}
	if code, _, errOut := run(t, "inspect"); code == 0 || !strings.Contains(errOut, "at least one FILE") {
		t.Errorf("inspect without files: exit %d, %q", code, errOut)
	}
}

func TestPackProgress(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, false)
	clock := p.start
	p.now = func() time.Time { return clock }
	for i := 1; i <= 10*progressCheckEvery; i++ {
		if i%progressCheckEvery == 0 {
			clock = clock.Add(400 * time.Millisecond)
		}
		p.tick(int64(i), int64(i)*100, i/5000)
	}
	p.summary(10*progressCheckEvery, 10*progressCheckEvery*100, 2)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	// 4 s pass in steps of 0.4 s: a report every 1.2 s, then the summary.
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "packed 3072 records (300.0 KiB) into 0 files so far") ||
		!strings.HasPrefix(lines[3], "packed 10240 records (1000.0 KiB) into 2 files in 4s") {
		t.Fatalf("progress:\n%s", buf.String())
	}

	buf.Reset()
	q := newProgress(&buf, true)
	q.tick(1, 1, 0)
	q.summary(1, 1, 1)
	if buf.Len() != 0 {
		t.Fatalf("quiet progress printed %q", buf.String())
	}
}
