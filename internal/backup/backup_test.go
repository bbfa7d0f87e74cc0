package backup

import (
	"bytes"
	"errors"
	"testing"

	"github.com/raftmaster/raftmaster/fsm"
)

// TestRoundTripAndDamage: a backup reads back whole; a truncated, padded,
// altered or foreign file is refused as ErrCorrupt.
func TestRoundTripAndDamage(t *testing.T) {
	f := fsm.New()
	f.ApplyEntry(1, fsm.Encode(&fsm.RequestSaveModel{TrainerID: "t", BlockDur: 1e9}))
	snap := f.SnapshotBytes()
	var buf bytes.Buffer
	h, err := Write(&buf, "v1.2.3", 1, snap)
	if err != nil {
		t.Fatal(err)
	}
	if h.StateHash != f.StateHash() {
		t.Fatalf("header hash %s, state hash %s", h.StateHash, f.StateHash())
	}
	whole := buf.Bytes()
	got, data, err := Read(bytes.NewReader(whole))
	if err != nil || got != h || !bytes.Equal(data, snap) {
		t.Fatalf("read back %+v %v", got, err)
	}
	altered := bytes.Clone(whole)
	altered[len(altered)-1] ^= 0xff
	for name, b := range map[string][]byte{
		"truncated": whole[:len(whole)-1],
		"padded":    append(bytes.Clone(whole), 0),
		"altered":   altered,
		"foreign":   []byte("root:x:0:0:root:/root:/bin/sh\n"),
		"empty":     nil,
	} {
		if _, _, err := Read(bytes.NewReader(b)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
