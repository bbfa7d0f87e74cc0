package httpapi_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// badCase is a request that must be refused with status and code, and
// change nothing.
type badCase struct {
	name    string
	method  string
	path    string
	body    string
	header  []string
	status  int
	code    string
	mention string // a part of the message, when it must name something
}

func post(name, path, body string, status int, code string) badCase {
	return badCase{name: name, method: http.MethodPost, path: path, body: body, status: status, code: code}
}

func (c badCase) naming(s string) badCase { c.mention = s; return c }

func (c badCase) with(header ...string) badCase { c.header = header; return c }

const (
	bad      = http.StatusBadRequest
	invalid  = "invalid"
	tooLarge = "too_large"
)

// badFiles makes RecordIO inputs for the dataset cases.
type badFiles struct {
	dir, good, corrupt, truncated, dangling, subdir string
}

func makeBadFiles(t *testing.T) badFiles {
	dir := t.TempDir()
	f := badFiles{dir: dir}
	f.good = writeRecordIO(t, dir, "good.recordio", 20, 64)
	f.corrupt = filepath.Join(dir, "corrupt.recordio")
	if err := os.WriteFile(f.corrupt, []byte(strings.Repeat("garbage!", 8)), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(f.good)
	if err != nil {
		t.Fatal(err)
	}
	f.truncated = filepath.Join(dir, "truncated.recordio")
	if err := os.WriteFile(f.truncated, data[:len(data)-5], 0o644); err != nil {
		t.Fatal(err)
	}
	f.dangling = filepath.Join(dir, "dangling.recordio")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), f.dangling); err != nil {
		t.Fatal(err)
	}
	f.subdir = filepath.Join(dir, "subdir.recordio")
	if err := os.Mkdir(f.subdir, 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

func quoted(ss ...string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ",")
}

func badCases(f badFiles) []badCase {
	member := uuid.New().String()
	long := strings.Repeat("x", 513)
	big := strings.Repeat("a", 9<<10)
	chunk := func(path string, off int) string {
		return fmt.Sprintf(`{"path":%q,"offset":%d,"records":1}`, path, off)
	}
	chunks := func(n int) string {
		c := make([]string, n)
		for i := range c {
			c[i] = chunk("/data/x", i)
		}
		return `{"chunks":[` + strings.Join(c, ",") + `]}`
	}
	watch := func(q string) badCase {
		return badCase{name: "watch " + q, method: http.MethodGet, path: rpc.PathAllgatherWatch + "?" + q, status: bad, code: invalid}
	}
	okWatch := "group=g&member=" + member + "&generation=1"
	kvGet := func(name, q string) badCase {
		return badCase{name: "kv get " + name, method: http.MethodGet, path: rpc.PathKVGet + "?" + q, status: bad, code: invalid}
	}
	kvWatch := func(name, q, mention string) badCase {
		return badCase{name: "kv watch " + name, method: http.MethodGet, path: rpc.PathKVWatch + "?" + q, status: bad, code: invalid, mention: mention}
	}
	return []badCase{
		// Bodies.
		post("malformed JSON", rpc.PathTaskGet, `{"pass":`, bad, invalid),
		post("wrong type", rpc.PathTaskGet, `{"pass":"zero"}`, bad, invalid).naming("pass"),
		post("unknown field", rpc.PathTaskGet, `{"pass":0,"passs":1}`, bad, invalid).naming("passs"),
		post("trailing object", rpc.PathTaskGet, `{"pass":0}{"pass":1}`, bad, invalid).naming("trailing"),
		post("trailing garbage", rpc.PathTaskGet, `{"pass":0} x`, bad, invalid).naming("trailing"),
		post("array body", rpc.PathTaskGet, `[0]`, bad, invalid).naming("object"),
		post("null body", rpc.PathTaskGet, `null`, bad, invalid).naming("object"),
		post("empty body", rpc.PathTaskGet, ``, bad, invalid).naming("empty"),
		post("oversized body", rpc.PathSaveModel, `{"trainer_id":"`+big+`","block_dur":"1s"}`, http.StatusRequestEntityTooLarge, tooLarge),
		post("oversized dataset body", rpc.PathDataset, chunks(2000), http.StatusRequestEntityTooLarge, tooLarge),

		// Methods and paths.
		{name: "GET a write", method: http.MethodGet, path: rpc.PathTaskGet, status: http.StatusMethodNotAllowed, code: rpc.CodeMethod},
		{name: "POST a read", method: http.MethodPost, path: rpc.PathStatus, body: `{}`, status: http.StatusMethodNotAllowed, code: rpc.CodeMethod},
		{name: "DELETE dataset", method: http.MethodDelete, path: rpc.PathDataset, status: http.StatusMethodNotAllowed, code: rpc.CodeMethod},
		{name: "PUT watch", method: http.MethodPut, path: rpc.PathAllgatherWatch, status: http.StatusMethodNotAllowed, code: rpc.CodeMethod},
		{name: "unknown path", method: http.MethodGet, path: "/v1/nope", status: http.StatusNotFound, code: rpc.CodeNotFound},

		// Request ids.
		post("request id without sequence", rpc.PathTaskGet, `{}`, bad, invalid).with(rpc.HeaderRequestID, member).naming(rpc.HeaderRequestID),
		post("request id bad uuid", rpc.PathTaskGet, `{}`, bad, invalid).with(rpc.HeaderRequestID, "nope/1"),
		post("request id nil uuid", rpc.PathTaskGet, `{}`, bad, invalid).with(rpc.HeaderRequestID, uuid.Nil.String()+"/1"),
		post("request id bad sequence", rpc.PathTaskGet, `{}`, bad, invalid).with(rpc.HeaderRequestID, member+"/-1"),
		post("request id extra part", rpc.PathTaskGet, `{}`, bad, invalid).with(rpc.HeaderRequestID, member+"/1/2"),

		// Tasks.
		post("negative pass", rpc.PathTaskGet, `{"pass":-1}`, bad, invalid).naming("pass"),
		post("task id 0", rpc.PathTaskFinished, `{"meta":{"id":0,"epoch":1}}`, bad, invalid).naming("task id"),
		post("negative epoch", rpc.PathTaskFailed, `{"meta":{"id":1,"epoch":-1}}`, bad, invalid).naming("epoch"),
		post("huge task id", rpc.PathTaskRenew, `{"meta":{"id":99999999999,"epoch":1}}`, bad, invalid),
		post("epoch past the last era", rpc.PathTaskFinished, fmt.Sprintf(`{"meta":{"id":1,"epoch":%d}}`, int64(fsm.MaxEpoch)+1), bad, invalid).naming("epoch"),

		// Save model.
		post("empty trainer id", rpc.PathSaveModel, `{"trainer_id":"","block_dur":"1s"}`, bad, invalid).naming("trainer_id"),
		post("oversized trainer id", rpc.PathSaveModel, `{"trainer_id":"`+long+`","block_dur":"1s"}`, bad, invalid).naming("trainer_id"),
		post("zero block_dur", rpc.PathSaveModel, `{"trainer_id":"t"}`, bad, invalid).naming("block_dur"),
		post("negative block_dur", rpc.PathSaveModel, `{"trainer_id":"t","block_dur":"-1s"}`, bad, invalid).naming("block_dur"),
		post("absurd block_dur", rpc.PathSaveModel, `{"trainer_id":"t","block_dur":"1000h"}`, bad, invalid).naming("block_dur"),
		post("overflowing block_dur", rpc.PathSaveModel, `{"trainer_id":"t","block_dur":"99999999999h"}`, bad, invalid),
		post("unparsable block_dur", rpc.PathSaveModel, `{"trainer_id":"t","block_dur":"forever"}`, bad, invalid),
		post("numeric block_dur", rpc.PathSaveModel, `{"trainer_id":"t","block_dur":1000}`, bad, invalid),

		// Allgather join and leave.
		post("numPeers 0", rpc.PathAllgatherJoin, `{"group":"g","member":"`+member+`","num_peers":0,"data":1}`, bad, invalid).naming("num_peers"),
		post("numPeers negative", rpc.PathAllgatherJoin, `{"group":"g","member":"`+member+`","num_peers":-2,"data":1}`, bad, invalid).naming("num_peers"),
		post("numPeers over limit", rpc.PathAllgatherJoin, `{"group":"g","member":"`+member+`","num_peers":9,"data":1}`, bad, invalid).naming("num_peers"),
		post("empty group", rpc.PathAllgatherJoin, `{"group":"","member":"`+member+`","num_peers":2,"data":1}`, bad, invalid).naming("group"),
		post("oversized group", rpc.PathAllgatherJoin, `{"group":"`+long+`","member":"`+member+`","num_peers":2,"data":1}`, bad, invalid).naming("group"),
		post("invalid member", rpc.PathAllgatherJoin, `{"group":"g","member":"not-a-uuid","num_peers":2,"data":1}`, bad, invalid),
		post("nil member", rpc.PathAllgatherJoin, `{"group":"g","member":"`+uuid.Nil.String()+`","num_peers":2,"data":1}`, bad, invalid).naming("member"),
		post("missing member", rpc.PathAllgatherJoin, `{"group":"g","num_peers":2,"data":1}`, bad, invalid).naming("member"),
		post("missing data", rpc.PathAllgatherJoin, `{"group":"g","member":"`+member+`","num_peers":2}`, bad, invalid).naming("data"),
		post("oversized data", rpc.PathAllgatherJoin, `{"group":"g","member":"`+member+`","num_peers":2,"data":"`+strings.Repeat("d", 2000)+`"}`, http.StatusRequestEntityTooLarge, tooLarge),
		post("negative join timeout", rpc.PathAllgatherJoin, `{"group":"g","member":"`+member+`","num_peers":2,"data":1,"timeout":"-1s"}`, bad, invalid).naming("timeout"),
		post("absurd join timeout", rpc.PathAllgatherJoin, `{"group":"g","member":"`+member+`","num_peers":2,"data":1,"timeout":"9999h"}`, bad, invalid).naming("timeout"),
		post("leave empty group", rpc.PathAllgatherLeave, `{"group":"","member":"`+member+`"}`, bad, invalid).naming("group"),
		post("leave invalid member", rpc.PathAllgatherLeave, `{"group":"g","member":"xyz"}`, bad, invalid),
		post("leave nil member", rpc.PathAllgatherLeave, `{"group":"g","member":"`+uuid.Nil.String()+`"}`, bad, invalid).naming("member"),

		// Allgather watch.
		watch("member=" + member + "&generation=1").naming("group"),
		watch("group=" + long + "&member=" + member + "&generation=1").naming("group"),
		watch("group=g&member=xyz&generation=1").naming("member"),
		watch("group=g&member=" + uuid.Nil.String() + "&generation=1").naming("member"),
		watch("group=g&member=" + member).naming("generation"),
		watch("group=g&member=" + member + "&generation=0").naming("generation"),
		watch("group=g&member=" + member + "&generation=-1").naming("generation"),
		watch(okWatch + "&wait=-1s").naming("wait"),
		watch(okWatch + "&wait=2h").naming("wait"),
		watch(okWatch + "&wait=soon").naming("wait"),

		// Datasets.
		post("no globs or chunks", rpc.PathDataset, `{}`, bad, invalid).naming("globs or chunks"),
		post("globs and chunks", rpc.PathDataset, `{"globs":[`+quoted(f.good)+`],"chunks":[`+chunk("/a", 0)+`]}`, bad, invalid).naming("not both"),
		post("too many globs", rpc.PathDataset, `{"globs":[`+quoted("a", "b", "c", "d", "e")+`]}`, bad, invalid).naming("5 globs"),
		post("empty glob", rpc.PathDataset, `{"globs":[""]}`, bad, invalid).naming("glob"),
		post("malformed glob", rpc.PathDataset, `{"globs":[`+quoted(filepath.Join(f.dir, "["))+`]}`, bad, invalid).naming("["),
		post("globs matching nothing", rpc.PathDataset, `{"globs":[`+quoted(filepath.Join(f.dir, "absent-*"), filepath.Join(f.dir, "missing-*"))+`]}`, bad, invalid).naming("missing-*"),
		post("too many files", rpc.PathDataset, `{"globs":[`+quoted(filepath.Join(f.dir, "*"))+`]}`, bad, invalid).naming("files"),
		post("corrupt file", rpc.PathDataset, `{"globs":[`+quoted(f.good, f.corrupt)+`]}`, bad, invalid).naming(f.corrupt),
		post("truncated file", rpc.PathDataset, `{"globs":[`+quoted(f.truncated)+`]}`, bad, invalid).naming(f.truncated),
		post("unreadable file", rpc.PathDataset, `{"globs":[`+quoted(f.dangling)+`]}`, bad, invalid).naming(f.dangling),
		post("directory", rpc.PathDataset, `{"globs":[`+quoted(f.subdir)+`]}`, bad, invalid).naming(f.subdir),
		post("too many chunks", rpc.PathDataset, chunks(51), bad, invalid).naming("51 chunks"),
		post("chunk without path", rpc.PathDataset, `{"chunks":[`+chunk("", 0)+`]}`, bad, invalid).naming("path"),
		post("chunk with long path", rpc.PathDataset, `{"chunks":[`+chunk(strings.Repeat("p", 4097), 0)+`]}`, bad, invalid).naming("path"),
		post("chunk with negative offset", rpc.PathDataset, `{"chunks":[`+chunk("/a", -1)+`]}`, bad, invalid).naming("offset"),
		post("chunk with negative records", rpc.PathDataset, `{"chunks":[{"path":"/a","offset":0,"records":-1}]}`, bad, invalid),
		post("negative chunks_per_task", rpc.PathDataset, `{"globs":[`+quoted(f.good)+`],"chunks_per_task":-1}`, bad, invalid).naming("chunks_per_task"),
		post("negative failure_max", rpc.PathDataset, `{"globs":[`+quoted(f.good)+`],"failure_max":-1}`, bad, invalid).naming("failure_max"),
		post("negative task_timeout", rpc.PathDataset, `{"globs":[`+quoted(f.good)+`],"task_timeout":"-1m"}`, bad, invalid).naming("task_timeout"),
		post("negative seed", rpc.PathDataset, `{"globs":[`+quoted(f.good)+`],"seed":-1}`, bad, invalid).naming("seed"),
		post("seed past 64 bits", rpc.PathDataset, `{"globs":[`+quoted(f.good)+`],"seed":18446744073709551616}`, bad, invalid).naming("seed"),
		post("shuffle not a boolean", rpc.PathDataset, `{"globs":[`+quoted(f.good)+`],"shuffle":"yes"}`, bad, invalid).naming("shuffle"),
		post("tiny task_timeout", rpc.PathDataset, `{"globs":[`+quoted(f.good)+`],"task_timeout":"1ns"}`, bad, invalid).naming("task_timeout"),
		post("absurd task_timeout", rpc.PathDataset, `{"globs":[`+quoted(f.good)+`],"task_timeout":"10000h"}`, bad, invalid).naming("task_timeout"),
		post("dataset unknown field", rpc.PathDataset, `{"globs":[`+quoted(f.good)+`],"glob":"x"}`, bad, invalid).naming("glob"),

		// The register.
		kvGet("no key", "").naming("key"),
		kvGet("empty key", "key=").naming("key"),
		kvGet("key with a space", "key=a+b").naming("printable ASCII"),
		kvGet("key with a control byte", "key=a%01").naming("printable ASCII"),
		kvGet("oversized key", "key="+strings.Repeat("k", 257)).naming("257 bytes"),
		post("cas empty key", rpc.PathKVCompareAndSet, `{"key":"","version":0,"value":"dg=="}`, bad, invalid).naming("key"),
		post("cas key with a newline", rpc.PathKVCompareAndSet, `{"key":"a\nb","version":0,"value":"dg=="}`, bad, invalid).naming("printable ASCII"),
		post("cas oversized key", rpc.PathKVCompareAndSet, `{"key":"`+strings.Repeat("k", 257)+`","version":0}`, bad, invalid).naming("257 bytes"),
		post("cas value not base64", rpc.PathKVCompareAndSet, `{"key":"k","version":0,"value":"not base64!"}`, bad, invalid),
		post("cas negative version", rpc.PathKVCompareAndSet, `{"key":"k","version":-1,"value":"dg=="}`, bad, invalid).naming("version"),
		post("cas version as a string", rpc.PathKVCompareAndSet, `{"key":"k","version":"1","value":"dg=="}`, bad, invalid).naming("version"),
		post("cas unknown field", rpc.PathKVCompareAndSet, `{"key":"k","version":0,"val":"dg=="}`, bad, invalid).naming("val"),
		post("cas value over the limit", rpc.PathKVCompareAndSet, `{"key":"k","version":0,"value":"`+base64.StdEncoding.EncodeToString(make([]byte, 1<<20+1))+`"}`,
			http.StatusConflict, rpc.CodeLimit).naming("max_kv_value"),
		post("cas oversized body", rpc.PathKVCompareAndSet, `{"key":"k","version":0,"value":"`+base64.StdEncoding.EncodeToString(make([]byte, 1<<20+8<<10))+`"}`,
			http.StatusRequestEntityTooLarge, tooLarge),

		// The register's store writes and reads.
		post("delete empty key", rpc.PathKVDelete, `{"key":""}`, bad, invalid).naming("key of 0 bytes"),
		post("delete key with a space", rpc.PathKVDelete, `{"key":"a b"}`, bad, invalid).naming("printable ASCII"),
		post("delete negative version", rpc.PathKVDelete, `{"key":"k","version":-1}`, bad, invalid).naming("version"),
		post("delete unknown field", rpc.PathKVDelete, `{"key":"k","prefix":true}`, bad, invalid).naming("prefix"),
		post("delete prefix empty", rpc.PathKVDeletePrefix, `{"prefix":""}`, bad, invalid).naming("a prefix is 1 to 256 bytes"),
		post("delete prefix oversized", rpc.PathKVDeletePrefix, `{"prefix":"`+strings.Repeat("p", 257)+`"}`, bad, invalid).naming("257 bytes"),
		post("delete prefix with a tab", rpc.PathKVDeletePrefix, `{"prefix":"a\tb"}`, bad, invalid).naming("printable ASCII"),
		post("add bad key", rpc.PathKVAdd, `{"key":"a\u0000","amount":1}`, bad, invalid).naming("printable ASCII"),
		post("add amount not an integer", rpc.PathKVAdd, `{"key":"n","amount":1.5}`, bad, invalid).naming("amount"),
		post("add amount past 64 bits", rpc.PathKVAdd, `{"key":"n","amount":9223372036854775808}`, bad, invalid).naming("amount"),
		post("multi-set no pairs", rpc.PathKVMultiSet, `{"pairs":[]}`, bad, invalid).naming("no key"),
		post("multi-set a key twice", rpc.PathKVMultiSet, `{"pairs":[{"key":"a","value":""},{"key":"a","value":"dg=="}]}`, bad, invalid).naming(`"a" is set twice`),
		post("multi-set bad key", rpc.PathKVMultiSet, `{"pairs":[{"key":"a","value":""},{"key":"b c","value":""}]}`, bad, invalid).naming("printable ASCII"),
		post("multi-set values over the limit together", rpc.PathKVMultiSet, `{"pairs":[{"key":"a","value":"`+base64.StdEncoding.EncodeToString(make([]byte, 1<<19+1))+
			`"},{"key":"b","value":"`+base64.StdEncoding.EncodeToString(make([]byte, 1<<19))+`"}]}`, http.StatusConflict, rpc.CodeLimit).naming("values of 1048577 bytes together"),
		post("append value over the limit", rpc.PathKVAppend, `{"key":"k","value":"`+base64.StdEncoding.EncodeToString(make([]byte, 1<<20+1))+`"}`,
			http.StatusConflict, rpc.CodeLimit).naming("max_kv_value_bytes"),
		post("append value not base64", rpc.PathKVAppend, `{"key":"k","value":"!!"}`, bad, invalid),
		post("compare-set bad key", rpc.PathKVCompareValue, `{"key":"","expected":"","desired":""}`, bad, invalid).naming("key"),
		post("compare-set desired over the limit", rpc.PathKVCompareValue, `{"key":"k","expected":"","desired":"`+base64.StdEncoding.EncodeToString(make([]byte, 1<<20+1))+`"}`,
			http.StatusConflict, rpc.CodeLimit).naming("max_kv_value_bytes"),
		post("multi-get no keys", rpc.PathKVMultiGet, `{"keys":[]}`, bad, invalid).naming("0 keys"),
		post("multi-get bad key", rpc.PathKVMultiGet, `{"keys":["a","b c"]}`, bad, invalid).naming("printable ASCII"),
		post("multi-get more keys than a job holds", rpc.PathKVMultiGet, multiGetBody(fsm.DefaultMaxJobKVKeys+1), bad, invalid).naming("max_job_kv_keys (1024)"),
		post("multi-get unknown field", rpc.PathKVMultiGet, `{"key":"a"}`, bad, invalid).naming("key"),
		{name: "num-keys bad prefix", method: http.MethodGet, path: rpc.PathKVNumKeys + "?prefix=a+b", status: bad, code: invalid, mention: "printable ASCII"},
		kvWatch("no key", "after=1", "key of 0 bytes"),
		kvWatch("bad key", "key=a+b", "printable ASCII"),
		kvWatch("after not a number", "key=k&after=latest", `after "latest" is not a version`),
		kvWatch("after negative", "key=k&after=-1", `after "-1"`),
		kvWatch("wait negative", "key=k&wait=-5s", `wait "-5s" is not a wait`),
		kvWatch("wait a number", "key=k&wait=5", "a Go duration from 0s"),

		// The limits.
		post("limits none given", rpc.PathLimitsSet, `{}`, bad, invalid).naming("no limit given"),
		post("limits negative max_jobs", rpc.PathLimitsSet, `{"max_jobs":-1}`, bad, invalid).naming("max_jobs -1"),
		post("limits max_jobs over its ceiling", rpc.PathLimitsSet, `{"max_jobs":65537}`, bad, invalid).naming("max_jobs 65537 out of range [0, 65536]"),
		post("limits negative job_ttl", rpc.PathLimitsSet, `{"job_ttl":"-1h"}`, bad, invalid).naming("job_ttl"),
		post("limits job_ttl not a duration", rpc.PathLimitsSet, `{"job_ttl":"soon"}`, bad, invalid).naming("soon"),
		post("limits max_kv_value over its ceiling", rpc.PathLimitsSet, `{"max_jobs":5,"max_kv_value":99999999999}`, bad, invalid).naming("max_kv_value"),
		post("limits max_kv_value_bytes over its ceiling", rpc.PathLimitsSet, `{"max_kv_value_bytes":99999999999}`, bad, invalid).naming("limit max_kv_value_bytes 99999999999 out of range"),
		post("limits one limit under both its names", rpc.PathLimitsSet, `{"max_job_group_bytes":1,"max_job_group_data":2}`, bad, invalid).naming("name the same limit"),
		post("limits as a string", rpc.PathLimitsSet, `{"max_jobs":"5"}`, bad, invalid).naming("max_jobs"),
		post("limits unknown field", rpc.PathLimitsSet, `{"max_job":5}`, bad, invalid).naming("max_job"),

		// Cluster changes.
		post("cluster join without id", rpc.PathClusterAddMember, `{"raft_addr":"a:1","api_addr":"a:2"}`, bad, invalid).naming("id"),
		post("cluster join without raft_addr", rpc.PathClusterAddMember, `{"id":"n4","api_addr":"a:2"}`, bad, invalid).naming("raft_addr"),
		post("cluster join oversized api_addr", rpc.PathClusterAddMember, `{"id":"n4","raft_addr":"a:1","api_addr":"`+long+`"}`, bad, invalid).naming("api_addr"),
		post("cluster remove without id", rpc.PathClusterRemoveMember, `{}`, bad, invalid).naming("id"),
		post("cluster remove malformed", rpc.PathClusterRemoveMember, `{"id":`, bad, invalid),
		post("cluster transfer oversized id", rpc.PathClusterTransfer, `{"id":"`+long+`"}`, bad, invalid).naming("id"),
		post("cluster transfer unknown field", rpc.PathClusterTransfer, `{"to":"n2"}`, bad, invalid).naming("to"),
	}
}

// multiGetBody is a multi-get of n keys.
func multiGetBody(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf(`"k%d"`, i)
	}
	return `{"keys":[` + strings.Join(keys, ",") + `]}`
}

func TestBadInputChangesNothing(t *testing.T) {
	files := makeBadFiles(t)
	for _, tc := range badCases(files) {
		t.Run(tc.name, func(t *testing.T) {
			var fake *fakeBackend
			e := newEnv(t, testConfig(), func(l *localBackend) rpcBackend { fake = newFake(l); return fake }, nil)
			// Some state for the hash to cover: an allgather group and a
			// granted save-model lease.
			e.join("g", uuid.New(), 3, "x")
			e.ok(rpc.PathSaveModel, rpc.SaveModelRequest{TrainerID: "t0", BlockDur: rpc.Duration(60e9)}, nil)
			before := e.state()

			var body []byte
			if tc.body != "" || tc.method == http.MethodPost {
				body = []byte(tc.body)
			}
			r := e.do(tc.method, tc.path, body, tc.header...)
			got := wantError(t, r, tc.status, tc.code)
			t.Logf("%d %s", r.status, r.body)
			if !strings.Contains(got.Message, tc.mention) {
				t.Errorf("message %q does not mention %q", got.Message, tc.mention)
			}
			if tc.status == http.StatusMethodNotAllowed && r.header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
			if after := e.state(); after != before {
				t.Errorf("state changed: %+v -> %+v", before, after)
			}
			if len(fake.joined)+len(fake.removed)+len(fake.transferred) > 0 {
				t.Error("a cluster change reached the backend")
			}
		})
	}
}

// A body over the limit is refused even when it is a valid request, and
// an empty body is enough for a transfer.
func TestBodyLimits(t *testing.T) {
	var fake *fakeBackend
	e := newEnv(t, testConfig(), func(l *localBackend) rpcBackend { fake = newFake(l); return fake }, nil)
	e.ok(rpc.PathClusterTransfer, rpc.TransferRequest{ID: "n2"}, nil)
	r := e.do(http.MethodPost, rpc.PathClusterTransfer, nil)
	if r.status != http.StatusOK || len(fake.transferred) != 2 || fake.transferred[0] != "n2" || fake.transferred[1] != "" {
		t.Fatalf("empty transfer: %d %s %q", r.status, r.body, fake.transferred)
	}
	// Member data up to MaxMemberData fits although the body limit of
	// other requests is about as small.
	data := `"` + strings.Repeat("d", 1000) + `"`
	r = e.do(http.MethodPost, rpc.PathAllgatherJoin, []byte(`{"group":"g","member":"`+uuid.NewString()+`","num_peers":2,"data":`+data+`}`))
	if r.status != http.StatusOK {
		t.Fatalf("join with 1000 bytes of data: %d %s", r.status, r.body)
	}
}
