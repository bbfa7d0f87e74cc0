package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/raftmaster/raftmaster/rpc"
)

// splitArray returns the elements of the JSON array b, which only
// whitespace may surround.
func splitArray(b []byte) ([]json.RawMessage, error) {
	elems, end, err := arrayElems(b, skipSpace(b, 0))
	if err == nil {
		err = onlySpace(b, end)
	}
	return elems, err
}

// TestArrayElems checks that arrayElems cuts a JSON array into the same
// elements as encoding/json, whitespace aside, for strings with escaped
// quotes and backslashes, brackets and commas inside strings, and nested
// values, and that each element is capped at its length.
func TestArrayElems(t *testing.T) {
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
	for _, in := range []string{``, `null`, `{}`, `"a"`, `[1,`, `[1 2]`, `["a]`, `["a\"]`, `[[1}]`, `[1]]`} {
		if got, err := splitArray([]byte(in)); err == nil {
			t.Errorf("%q: %q, want an error", in, got)
		}
	}
}

// TestDecodeWatchAnswer checks that decodeAnswer reads what
// encoding/json reads into rpc.WatchResponse, for the server's answers
// and for the same with whitespace, keys in another order or case,
// escaped keys, unknown keys and repeated keys, and that it refuses what
// is not a JSON object.
func TestDecodeWatchAnswer(t *testing.T) {
	for _, in := range []string{
		`{"status":"complete","data":["trainer-00000",{"a":[1,"]"]},null],"rank":2}` + "\n",
		`{"status":"pending","rank":0}`,
		`{"status":"pending","rank":0,"overdue":true}`,
		` { "rank" : 1 , "data" : [ 1 , 2 ] , "status" : "complete" } `,
		`{"STATUS":"complete","Data":[true],"rank":0,"extra":{"x":[1,{"y":"}"}]},"more":"\"}"}`,
		`{"st\u0061tus":"complete","data":["\"q\\"],"rank":0}`,
		`{"rank":5,"rank":0,"status":"pending","status":"complete","data":[0]}`,
		`{}`,
		`{"data":null,"status":"pending","rank":0}`,
		`{"data":[1],"data":null}`,
	} {
		var want rpc.WatchResponse
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		var got watchAnswer
		if err := got.decodeAnswer([]byte(in)); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got.Status != want.Status || got.Rank != want.Rank || got.Overdue != want.Overdue {
			t.Errorf("%s: read %+v, want %+v", in, got, want)
		}
		elems := got.values
		if len(elems) != len(want.Data) {
			t.Fatalf("%s: %d values %q, want %q", in, len(elems), elems, want.Data)
		}
		for i := range elems {
			if !bytes.Equal(elems[i], want.Data[i]) {
				t.Errorf("%s: value %d is %s, want %s", in, i, elems[i], want.Data[i])
			}
		}
	}
	for _, in := range []string{
		``, `[]`, `"complete"`, `{`, `{"status"}`, `{"status":}`, `{"status":"complete"`, `{"status":"complete",}`,
		`{"status":"complete"} x`, `{"status":1}`, `{"rank":"1"}`, `{"data":[1,2}`, `{"data":{"a":1]}`, `{status:"complete"}`,
		`{"data":"x"}`, `{"data":{}}`, `{"data":[1 2]}`,
	} {
		var wa watchAnswer
		if err := wa.decodeAnswer([]byte(in)); err == nil {
			t.Errorf("%q: read %+v, want an error", in, wa)
		}
	}
}

// BenchmarkWatchAnswer measures what a member of a group of 4096 pays to
// read the complete answer of its watch, once the body is in: with raw
// results, with Data decoded, and, as the baseline, encoding/json
// decoding the answer into rpc.WatchResponse and then each value into an
// any, as the client did before.
func BenchmarkWatchAnswer(b *testing.B) {
	const members = 4096
	data := make([]json.RawMessage, members)
	for i := range data {
		data[i], _ = json.Marshal(fmt.Sprintf("trainer-%05d", i))
	}
	body, err := json.Marshal(rpc.WatchResponse{Status: rpc.WatchComplete, Data: data, Rank: 7})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("raw", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var wa watchAnswer
			if err := wa.decodeAnswer(body); err != nil {
				b.Fatal(err)
			}
			if res, err := wa.completed(true); err != nil || len(res.Raw) != members {
				b.Fatal(len(res.Raw), err)
			}
		}
	})
	b.Run("decoded", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var wa watchAnswer
			if err := wa.decodeAnswer(body); err != nil {
				b.Fatal(err)
			}
			if res, err := wa.completed(false); err != nil || len(res.Data) != members {
				b.Fatal(len(res.Data), err)
			}
		}
	})
	b.Run("baseline", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var wr rpc.WatchResponse
			if err := json.Unmarshal(body, &wr); err != nil {
				b.Fatal(err)
			}
			values := make([]any, len(wr.Data))
			for i, d := range wr.Data {
				if err := json.Unmarshal(d, &values[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
