package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// raftmasterBinary finds the raftmaster binary to run: path when given;
// else the raftmaster next to this executable (bin/raftmaster beside
// bin/raftmaster-bench) or bin/raftmaster under the working directory;
// else it builds ./cmd/raftmaster of the module around the working
// directory into dir.
func raftmasterBinary(path, dir string, progress func(string, ...any)) (string, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("--raftmaster: %w", err)
		}
		return filepath.Abs(path)
	}
	var candidates []string
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(exe), "raftmaster"))
	}
	candidates = append(candidates, filepath.Join("bin", "raftmaster"))
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return filepath.Abs(c)
		}
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		return "", errors.New("no raftmaster binary found (bin/raftmaster) and not inside the module to build one: give --raftmaster")
	}
	bin := filepath.Join(dir, "raftmaster")
	progress("building raftmaster into %s", bin)
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/raftmaster")
	cmd.Dir = filepath.Dir(mod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/raftmaster: %v\n%s", err, out)
	}
	return bin, nil
}

// binaryVersion is what `bin --version` prints.
func binaryVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
