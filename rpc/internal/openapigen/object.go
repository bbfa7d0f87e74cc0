package main

import (
	"bytes"
	"encoding/json"
)

// object is a JSON object that keeps its keys in the order they were set,
// so that the document reads in a sensible order and comes out the same
// every time.
type object struct {
	keys []string
	vals map[string]any
}

// obj returns an object of key, value pairs; see set.
func obj(kv ...any) *object {
	o := &object{vals: map[string]any{}}
	for i := 0; i+1 < len(kv); i += 2 {
		o.set(kv[i].(string), kv[i+1])
	}
	return o
}

// set sets key k to v and returns o. A nil value, an empty string or an
// empty slice is left out.
func (o *object) set(k string, v any) *object {
	switch v := v.(type) {
	case nil:
		return o
	case string:
		if v == "" {
			return o
		}
	case []any:
		if len(v) == 0 {
			return o
		}
	case []string:
		if len(v) == 0 {
			return o
		}
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
	return o
}

// MarshalJSON writes the keys in order, without escaping HTML.
func (o *object) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	buf.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := enc.Encode(k); err != nil {
			return nil, err
		}
		buf.WriteByte(':')
		if err := enc.Encode(o.vals[k]); err != nil {
			return nil, err
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}
