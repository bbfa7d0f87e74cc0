package rpc

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
)

// Two limits were named apart from their flags before: max_job_group_data
// (--max-job-group-bytes) and max_kv_value (--max-kv-value-bytes). Their
// JSON names are now their flags', and the earlier names stay on the wire
// beside them, so that no client or server of an earlier release breaks:
//
//   - Limits, an answer, is written under both names, and read under
//     either (the earlier one from a server of an earlier release);
//   - LimitsRequest is written under the earlier names, since a server of
//     an earlier release refuses a field it does not know, and read under
//     either: one limit under both names must give one value.

// earlierLimitNames are the earlier JSON names of the renamed limits, by
// their names now.
var earlierLimitNames = map[string]string{
	"max_job_group_bytes": "max_job_group_data",
	"max_kv_value_bytes":  "max_kv_value",
}

// EarlierLimitName is the earlier JSON name of the limit named name now,
// when it was renamed: the OpenAPI document lists it as deprecated.
func EarlierLimitName(name string) (string, bool) {
	earlier, ok := earlierLimitNames[name]
	return earlier, ok
}

// renamedLimit is one limit under its name and its earlier name, as
// decoded: nil when absent.
type renamedLimit struct {
	name, earlier string
	now, before   *int64
}

// value is the limit given under either name; both must agree.
func (r renamedLimit) value() (*int64, error) {
	switch {
	case r.now == nil:
		return r.before, nil
	case r.before != nil && *r.before != *r.now:
		return nil, fmt.Errorf("%s %d and %s %d name the same limit: give one", r.name, *r.now, r.earlier, *r.before)
	}
	return r.now, nil
}

// MarshalJSON writes l, with the renamed limits also under their earlier
// names.
func (l Limits) MarshalJSON() ([]byte, error) {
	type plain Limits
	return json.Marshal(struct {
		plain
		MaxJobGroupData int64 `json:"max_job_group_data"`
		MaxKVValue      int64 `json:"max_kv_value"`
	}{plain(l), l.MaxJobGroupBytes, l.MaxKVValueBytes})
}

// UnmarshalJSON reads l, taking a renamed limit under its earlier name
// when its name is absent.
func (l *Limits) UnmarshalJSON(b []byte) error {
	type plain Limits
	var v struct {
		plain
		MaxJobGroupBytes *int64 `json:"max_job_group_bytes"`
		MaxKVValueBytes  *int64 `json:"max_kv_value_bytes"`
		MaxJobGroupData  *int64 `json:"max_job_group_data"`
		MaxKVValue       *int64 `json:"max_kv_value"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*l = Limits(v.plain)
	// An answer is read leniently: the limit's own name wins.
	if p := cmp.Or(v.MaxJobGroupBytes, v.MaxJobGroupData); p != nil {
		l.MaxJobGroupBytes = *p
	}
	if p := cmp.Or(v.MaxKVValueBytes, v.MaxKVValue); p != nil {
		l.MaxKVValueBytes = *p
	}
	return nil
}

// MarshalJSON writes r with the renamed limits under their earlier names,
// which servers of every release read.
func (r LimitsRequest) MarshalJSON() ([]byte, error) {
	type plain LimitsRequest
	p := plain(r)
	p.MaxJobGroupBytes, p.MaxKVValueBytes = nil, nil
	return json.Marshal(struct {
		plain
		MaxJobGroupData *int64 `json:"max_job_group_data,omitempty"`
		MaxKVValue      *int64 `json:"max_kv_value,omitempty"`
	}{p, r.MaxJobGroupBytes, r.MaxKVValueBytes})
}

// UnmarshalJSON reads r strictly, as the server reads every body: an
// unknown field is an error, and so is a renamed limit given under both
// its names with two values.
func (r *LimitsRequest) UnmarshalJSON(b []byte) error {
	type plain LimitsRequest
	var v struct {
		plain
		MaxJobGroupBytes *int64 `json:"max_job_group_bytes"`
		MaxKVValueBytes  *int64 `json:"max_kv_value_bytes"`
		MaxJobGroupData  *int64 `json:"max_job_group_data"`
		MaxKVValue       *int64 `json:"max_kv_value"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	groupBytes, err := renamedLimit{"max_job_group_bytes", earlierLimitNames["max_job_group_bytes"], v.MaxJobGroupBytes, v.MaxJobGroupData}.value()
	if err != nil {
		return err
	}
	valueBytes, err := renamedLimit{"max_kv_value_bytes", earlierLimitNames["max_kv_value_bytes"], v.MaxKVValueBytes, v.MaxKVValue}.value()
	if err != nil {
		return err
	}
	*r = LimitsRequest(v.plain)
	r.MaxJobGroupBytes, r.MaxKVValueBytes = groupBytes, valueBytes
	return nil
}
