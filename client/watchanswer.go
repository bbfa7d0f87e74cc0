package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// watchAnswer is rpc.WatchResponse with its data left as the JSON array
// it is, a slice of the answer's body: completed cuts it into the
// members' values without copying or decoding them one by one.
type watchAnswer struct {
	Status  string
	Data    json.RawMessage
	Rank    int
	Overdue bool
}

// decodeAnswer reads a watch answer in one pass over b. encoding/json
// would validate the whole answer, then scan its data again to skip it,
// then copy it, then be asked to split it: at thousands of members, each
// member's share of that outweighs the answer's transfer. The object and
// the array's structure are checked here, and the small fields decoded
// by encoding/json; the members' values are passed on as the server sent
// them (valid JSON, which it checks at the join), and Result.Data, when
// asked for, is decoded from them by encoding/json. Keys match as
// encoding/json matches them, unknown keys are ignored, and a key given
// twice keeps its last value.
func (wa *watchAnswer) decodeAnswer(b []byte) error {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return fmt.Errorf("watch answer %.40q is not a JSON object", b)
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return onlySpace(b, i+1)
	}
	for {
		if i == len(b) || b[i] != '"' {
			return fmt.Errorf("watch answer: no key at byte %d", i)
		}
		end, err := valueEnd(b, i)
		if err != nil {
			return err
		}
		key := b[i:end]
		if i = skipSpace(b, end); i == len(b) || b[i] != ':' {
			return fmt.Errorf("watch answer: no colon after key %s", key)
		}
		i = skipSpace(b, i+1)
		if end, err = valueEnd(b, i); err != nil {
			return err
		}
		if err := wa.field(key, b[i:end]); err != nil {
			return err
		}
		if i = skipSpace(b, end); i == len(b) {
			return errors.New("watch answer: unexpected end")
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return onlySpace(b, i+1)
		default:
			return fmt.Errorf("watch answer: unexpected %q at byte %d", b[i], i)
		}
	}
}

// field sets the field of key, a JSON string, to the JSON value v.
func (wa *watchAnswer) field(key, v []byte) error {
	var name string
	if err := json.Unmarshal(key, &name); err != nil {
		return fmt.Errorf("watch answer: key %s: %w", key, err)
	}
	var err error
	switch {
	case strings.EqualFold(name, "status"):
		err = json.Unmarshal(v, &wa.Status)
	case strings.EqualFold(name, "data"):
		wa.Data = v
	case strings.EqualFold(name, "rank"):
		err = json.Unmarshal(v, &wa.Rank)
	case strings.EqualFold(name, "overdue"):
		err = json.Unmarshal(v, &wa.Overdue)
	}
	if err != nil {
		return fmt.Errorf("watch answer: %s: %w", name, err)
	}
	return nil
}

// completed is the Result of a complete answer: Raw always, and Data
// unless raw is set, decoded in one pass over the array.
func (wa *watchAnswer) completed(raw bool) (Result, error) {
	elems, err := splitArray(wa.Data)
	if err != nil {
		return Result{}, fmt.Errorf("raftmaster client: allgather data: %w", err)
	}
	if wa.Rank < 0 || wa.Rank >= len(elems) {
		return Result{}, fmt.Errorf("raftmaster client: allgather rank %d outside the group's %d members", wa.Rank, len(elems))
	}
	res := Result{Raw: elems, Rank: wa.Rank}
	if raw {
		return res, nil
	}
	if err := json.Unmarshal(wa.Data, &res.Data); err != nil {
		return Result{}, fmt.Errorf("raftmaster client: decoding allgather data: %w", err)
	}
	return res, nil
}

// splitArray returns the elements of the JSON array b as slices of b,
// each capped at its length, without decoding them. Empty or null data
// has no elements.
func splitArray(b []byte) ([]json.RawMessage, error) {
	i := skipSpace(b, 0)
	if i == len(b) || string(b[i:len(b)-trailingSpace(b)]) == "null" {
		return nil, nil
	}
	if b[i] != '[' {
		return nil, fmt.Errorf("%.20q is not an array", b[i:])
	}
	// Commas bound the count from above; counting them is cheaper than
	// growing the slice.
	out := make([]json.RawMessage, 0, bytes.Count(b, []byte{','})+1)
	if i = skipSpace(b, i+1); i < len(b) && b[i] == ']' {
		return out, onlySpace(b, i+1)
	}
	for {
		end, err := valueEnd(b, i)
		if err != nil {
			return nil, err
		}
		out = append(out, b[i:end:end])
		if i = skipSpace(b, end); i == len(b) {
			return nil, errors.New("unterminated array")
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return out, onlySpace(b, i+1)
		default:
			return nil, fmt.Errorf("unexpected %q at byte %d of the array", b[i], i)
		}
	}
}

// valueEnd returns the index just past the JSON value that starts at
// b[i]: a string up to its closing quote, an array or object up to its
// matching bracket, any other value up to the next delimiter. Scalars
// are not checked.
func valueEnd(b []byte, i int) (int, error) {
	if i == len(b) {
		return 0, errors.New("unexpected end of JSON")
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '[', '{':
	default:
		j := i
		for j < len(b) && !isSpace(b[j]) && b[j] != ',' && b[j] != ']' && b[j] != '}' && b[j] != ':' {
			j++
		}
		if j == i {
			return 0, fmt.Errorf("no value at byte %d", i)
		}
		return j, nil
	}
	var closers []byte // the brackets still open, innermost last
	for j := i; j < len(b); j++ {
		switch c := b[j]; c {
		case '"':
			end, err := stringEnd(b, j)
			if err != nil {
				return 0, err
			}
			j = end - 1
		case '[':
			closers = append(closers, ']')
		case '{':
			closers = append(closers, '}')
		case ']', '}':
			if closers[len(closers)-1] != c {
				return 0, fmt.Errorf("unexpected %q at byte %d", c, j)
			}
			if closers = closers[:len(closers)-1]; len(closers) == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, errors.New("unexpected end of JSON")
}

// stringEnd returns the index just past the JSON string that starts at
// b[i]: its closing quote is the first that an even run of backslashes
// precedes.
func stringEnd(b []byte, i int) (int, error) {
	for j := i + 1; ; {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return 0, errors.New("unterminated string")
		}
		j += q
		k := j
		for b[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j + 1, nil
		}
		j++
	}
}

// isSpace reports JSON's insignificant whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// trailingSpace is the number of whitespace bytes that end b.
func trailingSpace(b []byte) int {
	n := 0
	for n < len(b) && isSpace(b[len(b)-1-n]) {
		n++
	}
	return n
}

// onlySpace reports anything but whitespace from b[i] on.
func onlySpace(b []byte, i int) error {
	if i = skipSpace(b, i); i < len(b) {
		return fmt.Errorf("unexpected %.20q after the value", b[i:])
	}
	return nil
}
