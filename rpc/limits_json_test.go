package rpc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// earlierLimits and earlierLimitsRequest are the answer and the request of limits as
// releases before the renamed limits wrote and read them.
type (
	earlierLimits struct {
		MaxJobs         int      `json:"max_jobs"`
		MaxJobTasks     int      `json:"max_job_tasks"`
		MaxJobChunks    int      `json:"max_job_chunks"`
		MaxJobGroups    int      `json:"max_job_groups"`
		MaxJobGroupData int64    `json:"max_job_group_data"`
		MaxStateBytes   int64    `json:"max_state_bytes"`
		JobTTL          Duration `json:"job_ttl"`
		MaxJobKVKeys    int      `json:"max_job_kv_keys"`
		MaxKVValue      int64    `json:"max_kv_value"`
	}
	earlierLimitsRequest struct {
		MaxJobs         *int      `json:"max_jobs,omitempty"`
		MaxJobTasks     *int      `json:"max_job_tasks,omitempty"`
		MaxJobChunks    *int      `json:"max_job_chunks,omitempty"`
		MaxJobGroups    *int      `json:"max_job_groups,omitempty"`
		MaxJobGroupData *int64    `json:"max_job_group_data,omitempty"`
		MaxStateBytes   *int64    `json:"max_state_bytes,omitempty"`
		JobTTL          *Duration `json:"job_ttl,omitempty"`
		MaxJobKVKeys    *int      `json:"max_job_kv_keys,omitempty"`
		MaxKVValue      *int64    `json:"max_kv_value,omitempty"`
	}
)

// TestLimitsUnderEarlierNames: the limits answer carries the renamed
// limits under both names, so a client of an earlier release reads them,
// and a client of this release reads the answer of an earlier server.
func TestLimitsUnderEarlierNames(t *testing.T) {
	l := Limits{MaxJobs: 3, MaxJobGroupBytes: 4096, MaxStateBytes: 1 << 30, JobTTL: Duration(time.Hour), MaxJobKVKeys: 5, MaxKVValueBytes: 2048}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{"max_job_group_bytes": 4096, "max_job_group_data": 4096, "max_kv_value_bytes": 2048, "max_kv_value": 2048, "max_jobs": 3} {
		if fields[name] != want {
			t.Errorf("%s is %v in %s, want %v", name, fields[name], b, want)
		}
	}
	var old earlierLimits
	if err := json.Unmarshal(b, &old); err != nil || old.MaxJobGroupData != 4096 || old.MaxKVValue != 2048 || old.MaxJobs != 3 {
		t.Errorf("an earlier client reads %+v, %v", old, err)
	}
	var back Limits
	if err := json.Unmarshal(b, &back); err != nil || back != l {
		t.Errorf("read back %+v, %v; want %+v", back, err, l)
	}

	// The answer of an earlier server.
	ob, err := json.Marshal(earlierLimits{MaxJobs: 3, MaxJobGroupData: 4096, MaxStateBytes: 1 << 30, JobTTL: Duration(time.Hour), MaxJobKVKeys: 5, MaxKVValue: 2048})
	if err != nil {
		t.Fatal(err)
	}
	back = Limits{}
	if err := json.Unmarshal(ob, &back); err != nil || back != l {
		t.Errorf("an earlier server's %s reads as %+v, %v; want %+v", ob, back, err, l)
	}
}

// TestLimitsRequestUnderEarlierNames: a change of limits is sent under the
// names every server reads, and the server takes a renamed limit under
// either name, refusing it under both with two values.
func TestLimitsRequestUnderEarlierNames(t *testing.T) {
	groupBytes, valueBytes, jobs := int64(4096), int64(2048), 3
	r := LimitsRequest{MaxJobs: &jobs, MaxJobGroupBytes: &groupBytes, MaxKVValueBytes: &valueBytes}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	// A server of an earlier release refuses unknown fields.
	var old earlierLimitsRequest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&old); err != nil || old.MaxJobGroupData == nil || *old.MaxJobGroupData != 4096 ||
		old.MaxKVValue == nil || *old.MaxKVValue != 2048 || *old.MaxJobs != 3 {
		t.Fatalf("an earlier server reads %s as %+v, %v", b, old, err)
	}
	if b, err := json.Marshal(LimitsRequest{MaxJobs: &jobs}); err != nil || string(b) != `{"max_jobs":3}` {
		t.Errorf("a change of max_jobs alone is written %s, %v", b, err)
	}

	for _, tc := range []struct {
		body       string
		group, val int64 // 0: absent
		err        string
	}{
		{body: `{"max_job_group_bytes":4096,"max_kv_value_bytes":2048}`, group: 4096, val: 2048},
		{body: `{"max_job_group_data":4096,"max_kv_value":2048}`, group: 4096, val: 2048},
		{body: `{"max_kv_value":7,"max_kv_value_bytes":7}`, val: 7},
		{body: `{"max_kv_value":7,"max_kv_value_bytes":8}`, err: "max_kv_value_bytes 8 and max_kv_value 7 name the same limit"},
		{body: `{"max_job_group_data":1,"max_job_group_bytes":2}`, err: "max_job_group_bytes 2 and max_job_group_data 1 name the same limit"},
		{body: `{"max_kv_values":7}`, err: `unknown field "max_kv_values"`},
	} {
		var got LimitsRequest
		err := json.Unmarshal([]byte(tc.body), &got)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.body, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.body, err)
			continue
		}
		if v := got.MaxJobGroupBytes; (v == nil) != (tc.group == 0) || (v != nil && *v != tc.group) {
			t.Errorf("%s: max_job_group_bytes %v, want %d", tc.body, v, tc.group)
		}
		if v := got.MaxKVValueBytes; (v == nil) != (tc.val == 0) || (v != nil && *v != tc.val) {
			t.Errorf("%s: max_kv_value_bytes %v, want %d", tc.body, v, tc.val)
		}
	}
}
