package client

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestSplitArray checks that splitArray cuts a JSON array into the same
// elements as encoding/json, whitespace aside, for strings with escaped
// quotes and backslashes, brackets and commas inside strings, and nested
// values, and that each element is capped at its length.
func TestSplitArray(t *testing.T) {
	for _, in := range []string{
		`[]`,
		` [ ] `,
		`[1]`,
		`["trainer-00001","trainer-00002"]`,
		`["a\"b", "c\\", "d\\\"e\\\\", "\\\\\\"]`,
		`["[,]", "{,}", ",", "]", "}"]`,
		`[ {"a": [1, 2, {"b": "]"}]} , [[], {}] , null, true, -1.5e3, "\u00e9\n" ]`,
		"[\n\t1,\r\n\t{\"k\": \"v\"}\n]",
	} {
		var want []json.RawMessage
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		got, err := splitArray([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d elements %q, want %d %q", in, len(got), got, len(want), want)
		}
		for i := range want {
			if !bytes.Equal(got[i], bytes.TrimSpace(want[i])) {
				t.Errorf("%s: element %d is %q, want %q", in, i, got[i], want[i])
			}
			if cap(got[i]) != len(got[i]) {
				t.Errorf("%s: element %d has capacity %d beyond its %d bytes", in, i, cap(got[i]), len(got[i]))
			}
		}
	}
	for _, in := range []string{``, `null`, ` null `} {
		if got, err := splitArray([]byte(in)); err != nil || len(got) != 0 {
			t.Errorf("%q: %q, %v; want no elements", in, got, err)
		}
	}
	for _, in := range []string{`{}`, `"a"`, `[1,`, `["a]`, `["a\"]`} {
		if got, err := splitArray([]byte(in)); err == nil {
			t.Errorf("%q: %q, want an error", in, got)
		}
	}
}
