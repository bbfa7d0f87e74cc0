package fsm

import (
	"bytes"
	"encoding/hex"
	"testing"
	"time"
)

// TestLimitsEntriesOfEarlierReleases: log entries and snapshots write the
// limits by position, never by name, so entries written before
// MaxJobGroupBytes and MaxKVValueBytes were named after their flags (they
// were MaxJobGroupData and MaxKVValue) decode into the same limits, and a
// replica of this release writes the same bytes for them.
func TestLimitsEntriesOfEarlierReleases(t *testing.T) {
	const now = 1700000000000000000
	for _, tc := range []struct {
		name  string
		entry string // Encode's output before the rename
		want  Limits
	}{
		{"every limit",
			"02118080d0e2c6bfce972f0000000000000000000000000000000000000ec801900312804080808080088080c58bc6d101168020",
			Limits{MaxJobs: 7, MaxJobTasks: 100, MaxJobChunks: 200, MaxJobGroups: 9, MaxJobGroupBytes: 4096,
				MaxStateBytes: 1 << 30, JobTTL: time.Hour, MaxJobKVKeys: 11, MaxKVValueBytes: 2048}},
		{"without the register's limits",
			"02118080d0e2c6bfce972f0000000000000000000000000000000000000e00000080400000",
			Limits{MaxJobs: 7, MaxJobGroupBytes: 4096}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := hex.DecodeString(tc.entry)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Decode(b)
			if err != nil {
				t.Fatalf("decoding an entry of an earlier release: %v", err)
			}
			sl, ok := c.(*SetLimits)
			if !ok || sl.Limits != tc.want || sl.Now != now {
				t.Fatalf("decoded %#v, want limits %+v at %d", c, tc.want, now)
			}
			again := &SetLimits{Limits: tc.want}
			again.Now = now
			if got := Encode(again); !bytes.Equal(got, b) {
				t.Fatalf("this release writes %x, the earlier one wrote %x", got, b)
			}
		})
	}
}
