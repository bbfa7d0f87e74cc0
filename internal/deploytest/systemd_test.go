package deploytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const systemdUnit = "../../deploy/systemd/raftmaster.service"

// TestSystemdUnit: the unit runs the node as a user systemd makes for it,
// owning only its state directory, with its flags from an environment
// file, and Raft secured by the cluster key it hands over as a credential;
// `systemd-analyze verify` finds nothing wrong with it (an unknown or
// misspelt directive included), and `systemd-analyze security` rates its
// exposure OK (at most 2.0 of 10).
func TestSystemdUnit(t *testing.T) {
	unit, err := os.ReadFile(systemdUnit)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"DynamicUser=yes", "StateDirectory=raftmaster", "EnvironmentFile=/etc/raftmaster/raftmaster.env",
		"Environment=RAFTMASTER_DATA_DIR=%S/raftmaster", "ExecStart=/usr/local/bin/raftmaster serve",
		"NoNewPrivileges=yes", "ProtectSystem=strict", "CapabilityBoundingSet=",
		"LoadCredential=cluster.key:/etc/raftmaster/cluster.key", "Environment=RAFTMASTER_CLUSTER_KEY_FILE=%d/cluster.key",
	} {
		if !strings.Contains("\n"+string(unit)+"\n", "\n"+line+"\n") {
			t.Errorf("the unit lacks %q", line)
		}
	}
	if strings.Contains(string(unit), "\nUser=") {
		t.Error("the unit names a User=, which nothing creates")
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	// verify checks that ExecStart's program exists: point it at one that
	// does, the unit is what is checked here.
	copy := filepath.Join(t.TempDir(), "raftmaster.service")
	if err := os.WriteFile(copy, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/raftmaster", "/bin/true")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", copy).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(analyze, "security", "--offline=yes", "--threshold=20", copy).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.0 (%v):\n%s", err, out)
	}
}
