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
	// values are the elements of Data, slices of it.
	values []json.RawMessage
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
		name, err := keyName(key)
		if err != nil {
			return err
		}
		i = skipSpace(b, i+1)
		if strings.EqualFold(name, "data") && i < len(b) && b[i] == '[' {
			// Split as it is read: the one pass over the data.
			if wa.values, end, err = arrayElems(b, i); err != nil {
				return fmt.Errorf("watch answer: data: %w", err)
			}
			wa.Data = b[i:end]
		} else {
			if end, err = valueEnd(b, i); err != nil {
				return err
			}
			if err := wa.field(name, b[i:end]); err != nil {
				return err
			}
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

// keyName decodes key, a JSON string.
func keyName(key []byte) (string, error) {
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key[1 : len(key)-1]), nil
	}
	var name string
	if err := json.Unmarshal(key, &name); err != nil {
		return "", fmt.Errorf("watch answer: key %s: %w", key, err)
	}
	return name, nil
}

// field sets the field called name to the JSON value v (the data when it
// is not an array).
func (wa *watchAnswer) field(name string, v []byte) error {
	var err error
	switch {
	case strings.EqualFold(name, "status"):
		err = json.Unmarshal(v, &wa.Status)
	case strings.EqualFold(name, "data"):
		if string(v) != "null" {
			err = fmt.Errorf("%.20q is not an array", v)
		}
		wa.Data, wa.values = nil, nil
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
	if wa.Rank < 0 || wa.Rank >= len(wa.values) {
		return Result{}, fmt.Errorf("raftmaster client: allgather rank %d outside the group's %d members", wa.Rank, len(wa.values))
	}
	res := Result{Raw: wa.values, Rank: wa.Rank}
	if raw {
		return res, nil
	}
	if err := json.Unmarshal(wa.Data, &res.Data); err != nil {
		return Result{}, fmt.Errorf("raftmaster client: decoding allgather data: %w", err)
	}
	return res, nil
}

// arrayElems returns the elements of the JSON array that starts at b[i],
// as slices of b each capped at its length, without decoding them, and
// the index just past the array.
func arrayElems(b []byte, i int) ([]json.RawMessage, int, error) {
	if i == len(b) || b[i] != '[' {
		return nil, 0, fmt.Errorf("no array at byte %d", i)
	}
	// Commas bound the count from above; counting them is cheaper than
	// growing the slice.
	out := make([]json.RawMessage, 0, bytes.Count(b[i:], []byte{','})+1)
	if i = skipSpace(b, i+1); i < len(b) && b[i] == ']' {
		return out, i + 1, nil
	}
	for {
		var end int
		var err error
		if i < len(b) && b[i] == '"' {
			end, err = stringEnd(b, i)
		} else {
			end, err = valueEnd(b, i)
		}
		if err != nil {
			return nil, 0, err
		}
		out = append(out, b[i:end:end])
		if i = skipSpace(b, end); i == len(b) {
			return nil, 0, errors.New("unterminated array")
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return out, i + 1, nil
		default:
			return nil, 0, fmt.Errorf("unexpected %q at byte %d of the array", b[i], i)
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

// onlySpace reports anything but whitespace from b[i] on.
func onlySpace(b []byte, i int) error {
	if i = skipSpace(b, i); i < len(b) {
		return fmt.Errorf("unexpected %.20q after the value", b[i:])
	}
	return nil
}
