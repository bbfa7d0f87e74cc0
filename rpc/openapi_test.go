package rpc

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/google/uuid"
)

// This file generates rpc/openapi.json, the wire contract written down for
// other languages, from Endpoints and the Go types, and fails when the
// committed document differs from what they say:
//
//	go test ./rpc -run TestOpenAPI -update
//
// rewrites it. The schemas come from the types by reflection (field names
// and omitempty/omitzero from the json tags). The descriptions are the Go
// doc comments: the package's source is parsed with go/parser and go/doc,
// and each type's, field's, code's and sentinel's comment becomes the
// description of its schema, property or enum value. So the document says
// what the Go reader reads, and a changed comment is a changed document
// (the test asks for -update, which keeps the two from drifting apart). The
// few things no comment says are in this file: the top-level description,
// the enums of string fields and the meaning of the codes that have no
// comment.

var update = flag.Bool("update", false, "rewrite openapi.json from Endpoints and the Go types")

// openAPIFile is the document, relative to the package directory.
const openAPIFile = "openapi.json"

// openAPIDescription is the document's top-level description (Markdown).
var openAPIDescription = strings.Join([]string{
	"The HTTP/JSON API of raftmaster, a Raft-replicated master for ML training jobs. " +
		"This document is generated from the Go package github.com/raftmaster/raftmaster/rpc " +
		"by `go test ./rpc -run TestOpenAPI -update`; do not edit it by hand.",
	"",
	"- **Any node answers.** A request that needs the leader, sent to a node that does not lead, is answered " +
		"307 Temporary Redirect with Location set to the same path and query on the leader: send it again there, " +
		"with the same body and headers. During an election the node holds the request until a leader serves, up to a few seconds, " +
		"then redirects; only then does a node that knows no leader answer 503 with code `no_leader`. " +
		"A client may list in the " + HeaderUnreachable + " header the API addresses that just refused its connections, " +
		"so that no node redirects it to a dead leader. Every answer names the node that gave it in the " + HeaderNode + " header.",
	"- **Retry-After.** A 503 `no_leader`, `unavailable` or `too_many_clients` carries Retry-After (in seconds): retry after it. " +
		"`unknown_outcome` carries none: retry at once, with the same request id.",
	"- **Request ids.** A write (an operation that takes the " + HeaderRequestID + " header) carries " +
		"`<client uuid>/<sequence>`: one client id per client process and a new sequence number per request, starting at 1, " +
		"reused by every retry of that request. The cluster answers a retry with the first outcome and changes nothing, " +
		"so a write can always be retried. `unknown_outcome` means the write may or may not have applied: retry with the same id.",
	"- **The de-duplication window.** The cluster remembers a client id's outcomes until 30 minutes of cluster time pass " +
		"without a request from it, whatever other clients do; send no retry later than 15 minutes after a write's first attempt. " +
		"A client id it does not remember is refused past sequence 1 with 409 `unknown_client` (forgotten, or never seen; " +
		"nothing changed): if no earlier attempt of that write was sent, send it again as sequence 1 of a new client id; " +
		"if it was a retry, the write's outcome is unknown. A new client id is refused with 503 `too_many_clients` " +
		"while the cluster remembers as many client ids used within the window as it holds: retry with the same id.",
	"- **FSM time.** Times in answers (applied_at, clock, deadlines) are FSM time, the cluster's own clock, " +
		"written as RFC 3339 with nanoseconds: compare them with each other, not with a wall clock.",
	"- **Durations** are Go duration strings such as `30s` or `1m30s`.",
	"- **Bodies** are one JSON object with snake_case keys; a request body with an unknown key is refused (400 `invalid`). " +
		"Errors are JSON objects with a stable code and a message for people.",
}, "\n")

// enums are the values of string fields that take a fixed set, keyed by
// "Type.Field".
var enums = map[string][]string{
	"WatchResponse.Status": {WatchPending, WatchComplete},
}

// codeMeanings says what the codes whose comment does not (or does not
// fit the enum's list) mean.
var codeMeanings = map[string]string{
	CodeNotLeader: "this node is not the leader: the body of a 307 redirect to the leader (Location)",
	CodeMethod:    "the path does not take this method; Allow lists the one it does",
	CodeInternal:  "an unexpected server error",
}

// durationPattern matches the Go duration strings that time.ParseDuration
// reads, such as "30s", "1m30s", "1.5h" or "-250ms".
const durationPattern = `^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`

// requestIDPattern matches a request id, "<client uuid>/<sequence>".
const requestIDPattern = `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}/[0-9]+$`

func TestOpenAPI(t *testing.T) {
	got := generateOpenAPI(t)
	if *update {
		if err := os.WriteFile(openAPIFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", openAPIFile, len(got))
		return
	}
	want, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatalf("%v; run: go test ./rpc -run TestOpenAPI -update", err)
	}
	if d := firstDifference(want, got); d != "" {
		t.Fatalf("rpc/%s does not match what Endpoints and the Go types say.\nFirst difference: %s\n"+
			"If the change to the wire contract is intended, run: go test ./rpc -run TestOpenAPI -update", openAPIFile, d)
	}
}

// TestOpenAPIDocument checks the committed document on its own: valid
// JSON, the required top-level fields, every $ref resolves, and every
// endpoint is there with its method, a 200 answer and, for a write, the
// request id header.
func TestOpenAPIDocument(t *testing.T) {
	b, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", openAPIFile, err)
	}
	if v, _ := d["openapi"].(string); !strings.HasPrefix(v, "3.") {
		t.Errorf("openapi is %q, want 3.x", d["openapi"])
	}
	info, _ := d["info"].(map[string]any)
	if info["title"] == nil || info["version"] == nil {
		t.Errorf("info lacks title or version: %v", info)
	}
	paths, _ := d["paths"].(map[string]any)
	if len(paths) == 0 {
		t.Fatal("no paths")
	}
	refs := 0
	walkJSON("", d, func(at string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return
		}
		refs++
		if _, err := resolvePointer(d, ref); err != nil {
			t.Errorf("at %s: $ref %q: %v", at, ref, err)
		}
	})
	if refs == 0 {
		t.Error("the document has no $ref at all")
	}
	for _, ep := range Endpoints {
		item, _ := paths[ep.Path].(map[string]any)
		op, _ := item[strings.ToLower(ep.Method)].(map[string]any)
		if op == nil {
			t.Errorf("%s %s is not in the document", ep.Method, ep.Path)
			continue
		}
		if len(item) != 1 {
			t.Errorf("%s has %d operations, want 1", ep.Path, len(item))
		}
		responses, _ := op["responses"].(map[string]any)
		if responses["200"] == nil {
			t.Errorf("%s %s has no 200 answer", ep.Method, ep.Path)
		}
		if hasRequestID := strings.Contains(fmt.Sprint(op["parameters"]), "/RequestID"); hasRequestID != ep.Write {
			t.Errorf("%s %s: request id header %v, write %v", ep.Method, ep.Path, hasRequestID, ep.Write)
		}
	}
	jobScoped := 0
	for _, ep := range Endpoints {
		if !ep.Job {
			continue
		}
		jobScoped++
		path := JobPath("{"+JobParam+"}", ep.Path)
		item, _ := paths[path].(map[string]any)
		op, _ := item[strings.ToLower(ep.Method)].(map[string]any)
		if op == nil || !strings.Contains(fmt.Sprint(op["parameters"]), "in:path") {
			t.Errorf("%s %s, the job-scoped route of %s, is not in the document with its job parameter", ep.Method, path, ep.Path)
		}
	}
	if len(paths) != len(Endpoints)+jobScoped {
		t.Errorf("%d paths, %d endpoints of which %d are also served per job", len(paths), len(Endpoints), jobScoped)
	}
}

// TestEndpoints checks the table against the Path and Code constants and
// against itself.
func TestEndpoints(t *testing.T) {
	d := readDocs(t)
	paths := map[string]string{} // value → constant
	for _, c := range d.consts {
		// A constant of no literal value is another's earlier name.
		if strings.HasPrefix(c.name, "Path") && c.value != "" {
			paths[c.value] = c.name
		}
	}
	if len(paths) == 0 {
		t.Fatal("found no Path constants")
	}
	known := map[string]bool{}
	for _, c := range d.codes() {
		known[c.value] = true
	}
	seen := map[string]bool{}
	for _, ep := range Endpoints {
		name := ep.Method + " " + ep.Path
		if _, ok := paths[ep.Path]; !ok {
			t.Errorf("%s: the path is not a Path constant", name)
		}
		if seen[ep.Path] {
			t.Errorf("%s: the path has two endpoints", name)
		}
		seen[ep.Path] = true
		switch ep.Method {
		case http.MethodGet:
			if ep.Request != nil || ep.Write {
				t.Errorf("%s: a GET takes no body and is no write", name)
			}
		case http.MethodPost:
			if ep.Request == nil || len(ep.Query) > 0 {
				t.Errorf("%s: a POST takes a body and no query", name)
			}
		default:
			t.Errorf("%s: method is neither GET nor POST", name)
		}
		if ep.Summary == "" || ep.Response == nil {
			t.Errorf("%s: no summary or no response type", name)
		}
		if st := ep.Stream; st != nil {
			if st.ContentType == "" || st.ContentType == ContentTypeJSON || st.Doc == "" || len(st.Trailers) == 0 && len(st.Headers) == 0 {
				t.Errorf("%s: a stream needs a content type other than JSON's, a doc, and its header fields", name)
			}
			for _, p := range append(slices.Clone(st.Headers), st.Trailers...) {
				if !strings.HasPrefix(p.Name, "X-Raftmaster-") || p.Doc == "" || p.Type == nil {
					t.Errorf("%s: stream field %q: not X-Raftmaster-, undocumented or untyped", name, p.Name)
				}
			}
		}
		params := map[string]bool{}
		for _, p := range ep.Query {
			if p.Name == "" || p.Doc == "" || p.Type == nil || params[p.Name] {
				t.Errorf("%s: query parameter %q: empty, undocumented, untyped or twice", name, p.Name)
			}
			params[p.Name] = true
		}
		errs := map[string]bool{}
		for _, c := range ep.Errors {
			switch {
			case !known[c]:
				t.Errorf("%s: error %q is not a Code constant", name, c)
			case c == CodeMethod || c == CodeInternal || c == CodeNotLeader:
				t.Errorf("%s: error %q is implied and not listed", name, c)
			case errs[c]:
				t.Errorf("%s: error %q listed twice", name, c)
			}
			errs[c] = true
		}
		need := func(why string, cs ...string) {
			for _, c := range cs {
				if !errs[c] {
					t.Errorf("%s: %s, but %q is not among its errors", name, why, c)
				}
			}
		}
		if ep.Request != nil {
			need("it takes a body", CodeInvalid, CodeTooLarge)
		}
		if ep.Write {
			need("it is a write", CodeInvalid, CodeUnknownOutcome)
		}
		if ep.Redirects {
			need("it needs the leader", CodeNoLeader)
		}
	}
	for v, c := range paths {
		if !seen[v] {
			t.Errorf("%s (%s) has no endpoint", c, v)
		}
	}
}

// TestDurationPattern checks that the pattern given for durations matches
// what Duration writes, and only strings that it reads.
func TestDurationPattern(t *testing.T) {
	re := regexp.MustCompile(durationPattern)
	for _, d := range []time.Duration{0, 1, time.Microsecond, 1500 * time.Millisecond, 90 * time.Second,
		2*time.Hour + 45*time.Minute + 500*time.Millisecond, -3 * time.Second, 1<<63 - 1, -1 << 63} {
		b, err := json.Marshal(Duration(d))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := strconv.Unquote(string(b))
		if !re.MatchString(s) {
			t.Errorf("the pattern does not match %q", s)
		}
	}
	for _, s := range []string{"0", "30s", "1.5h", ".5s", "1.s", "+2m", "1h2m3s4ms5us6ns", "3µs"} {
		if !re.MatchString(s) {
			t.Errorf("the pattern does not match %q", s)
		}
		if _, err := time.ParseDuration(s); err != nil {
			t.Errorf("%q matches the pattern but does not parse: %v", s, err)
		}
	}
	for _, s := range []string{"", "30", "1d", "s", ".s", "1 s", "-", "1s2", "0s "} {
		if re.MatchString(s) {
			t.Errorf("the pattern matches %q", s)
		}
		if _, err := time.ParseDuration(s); err == nil {
			t.Errorf("%q parses but the pattern refuses it", s)
		}
	}
}

// TestRequestIDPattern checks the request id pattern against a real one.
func TestRequestIDPattern(t *testing.T) {
	re := regexp.MustCompile(requestIDPattern)
	if id := uuid.NewString() + "/17"; !re.MatchString(id) {
		t.Errorf("the pattern does not match %q", id)
	}
	for _, s := range []string{"", "x/1", uuid.NewString(), uuid.NewString() + "/", uuid.NewString() + "/-1"} {
		if re.MatchString(s) {
			t.Errorf("the pattern matches %q", s)
		}
	}
}

// generateOpenAPI returns the document, pretty-printed.
func generateOpenAPI(t testing.TB) []byte {
	g := &generator{t: t, docs: readDocs(t), schemas: map[string]*object{}}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(g.document()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The Go types with a schema of their own.
var (
	rpcPkgPath   = reflect.TypeFor[Endpoint]().PkgPath()
	timeType     = reflect.TypeFor[time.Time]()
	uuidType     = reflect.TypeFor[uuid.UUID]()
	rawType      = reflect.TypeFor[json.RawMessage]()
	durationType = reflect.TypeFor[Duration]()
	errorType    = reflect.TypeFor[Error]()
	// limitsType and limitsRequestType carry renamed limits.
	limitsType        = reflect.TypeFor[Limits]()
	limitsRequestType = reflect.TypeFor[LimitsRequest]()
)

// generator builds the document.
type generator struct {
	t    testing.TB
	docs *goDocs
	// schemas are the components/schemas, by name.
	schemas map[string]*object
}

func (g *generator) document() *object {
	paths := obj()
	for _, ep := range Endpoints {
		paths.set(ep.Path, obj(strings.ToLower(ep.Method), g.operation(ep, ep.Path)))
	}
	// The job-scoped endpoints again, under each job's prefix.
	for _, ep := range Endpoints {
		if ep.Job {
			path := JobPath("{"+JobParam+"}", ep.Path)
			paths.set(path, obj(strings.ToLower(ep.Method), g.operation(ep, path)))
		}
	}
	errorRef := g.schema(errorType)
	components := obj(
		"schemas", g.componentSchemas(),
		"parameters", obj("RequestID", obj(
			"name", HeaderRequestID,
			"in", "header",
			"required", false,
			"description", "`<client uuid>/<sequence>`: the client's id and a new sequence number for each request, "+
				"the same on every retry of it. A retry with the same id, within the de-duplication window, is answered with the "+
				"first outcome and changes nothing. Without it the write is not de-duplicated.",
			"schema", obj("type", "string", "pattern", requestIDPattern),
			"example", "6f1c2f4e-8a77-4c1e-9d43-2b0a6a9e5c11/42",
		)),
		"headers", obj("RetryAfter", obj(
			"description", "Seconds to wait before retrying.",
			"schema", obj("type", "integer"),
		)),
		"responses", obj(
			"Redirect", obj(
				"description", "Temporary Redirect: this node does not lead. Send the same request to Location, "+
					"the same path and query on the leader's API. The body's code is `not_leader`.",
				"headers", obj("Location", obj(
					"description", "The URL of the same path and query on the leader.",
					"required", true,
					"schema", obj("type", "string", "format", "uri"),
				)),
				"content", jsonContent(errorRef),
			),
			"Error", obj(
				"description", "Any other error, such as 405 `method_not_allowed` (with Allow) or 500 `internal`.",
				"content", jsonContent(errorRef),
			),
		),
	)
	return obj(
		"openapi", "3.0.3",
		"info", obj(
			"title", "raftmaster",
			"version", "v1",
			"description", openAPIDescription,
		),
		"servers", []any{obj(
			"url", "http://{node}",
			"description", "Any node of the cluster: its API address (--http-addr).",
			"variables", obj("node", obj("default", "127.0.0.1:8001")),
		)},
		"paths", paths,
		"components", components,
	)
}

// operation describes one endpoint served at path: ep.Path, or for a
// job-scoped endpoint also its path under /v1/jobs/{job}.
func (g *generator) operation(ep Endpoint, path string) *object {
	summary, rest, _ := strings.Cut(ep.Summary, ". ")
	if rest != "" {
		summary += "."
	}
	var notes []string
	if rest != "" {
		notes = append(notes, rest)
	}
	if ep.Write {
		notes = append(notes, "A write: send "+HeaderRequestID+"; a retry with the same id is answered with the first outcome and changes nothing.")
	}
	if ep.Redirects {
		notes = append(notes, "A node that does not lead may answer 307 to the leader.")
	}
	var params []any
	if strings.Contains(path, "{"+JobParam+"}") {
		params = append(params, obj(
			"name", JobParam,
			"in", "path",
			"required", true,
			"description", "The job: 1 to 63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit. "+
				"The same endpoint outside /v1/jobs/{job} serves the job named "+DefaultJob+".",
			"schema", obj("type", "string", "pattern", "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"),
		))
	} else if ep.Job {
		notes = append(notes, "Serves the job named "+DefaultJob+"; "+JobPath("{"+JobParam+"}", ep.Path)+" serves any job.")
	}
	for _, p := range ep.Query {
		params = append(params, obj(
			"name", p.Name,
			"in", "query",
			"required", p.Required,
			"description", p.Doc,
			"schema", g.schema(reflect.TypeOf(p.Type)),
		))
	}
	if ep.Write {
		params = append(params, obj("$ref", "#/components/parameters/RequestID"))
	}
	op := obj(
		"operationId", g.operationID(ep.Path, path != ep.Path),
		"summary", summary,
		"description", strings.Join(notes, "\n\n"),
		"parameters", params,
	)
	if ep.Request != nil {
		op.set("requestBody", obj("required", true, "content", jsonContent(g.schema(reflect.TypeOf(ep.Request)))))
	}
	responses := obj("200", g.okResponse(ep))
	if ep.Redirects {
		responses.set("307", obj("$ref", "#/components/responses/Redirect"))
	}
	byStatus := map[int][]string{}
	for _, c := range ep.Errors {
		s := HTTPStatus(c)
		byStatus[s] = append(byStatus[s], c)
	}
	statuses := make([]int, 0, len(byStatus))
	for s := range byStatus {
		statuses = append(statuses, s)
	}
	sort.Ints(statuses)
	for _, s := range statuses {
		cs := byStatus[s]
		quoted := make([]string, len(cs))
		for i, c := range cs {
			quoted[i] = "`" + c + "`"
		}
		r := obj("description", fmt.Sprintf("%s: code %s.", http.StatusText(s), strings.Join(quoted, ", ")))
		if s == http.StatusServiceUnavailable {
			r.set("headers", obj("Retry-After", obj("$ref", "#/components/headers/RetryAfter")))
		}
		r.set("content", jsonContent(g.schema(errorType)))
		responses.set(strconv.Itoa(s), r)
	}
	responses.set("default", obj("$ref", "#/components/responses/Error"))
	op.set("responses", responses)
	return op
}

// okResponse describes the 200 answer: Response's JSON, and with a
// Stream, the streamed body too, its headers and its trailers (which
// OpenAPI 3.0 has no field for: they go in x-trailers and the
// description).
func (g *generator) okResponse(ep Endpoint) *object {
	content := jsonContent(g.schema(reflect.TypeOf(ep.Response)))
	if ep.Stream == nil {
		return obj("description", "OK", "content", content)
	}
	st := ep.Stream
	content.set(st.ContentType, obj("schema", obj("type", "string", "format", "binary", "description", st.Doc)))
	// Sent with the stream only, so required by neither answer.
	fields := func(ps []Param) *object {
		o := obj()
		for _, p := range ps {
			o.set(p.Name, obj("description", p.Doc+" Sent with the "+st.ContentType+" answer only.", "schema", g.schema(reflect.TypeOf(p.Type))))
		}
		return o
	}
	names := make([]string, len(st.Trailers))
	for i, p := range st.Trailers {
		names[i] = p.Name
	}
	desc := fmt.Sprintf("OK. With Accept: %s, the body is streamed and ends with the trailers %s (declared in the Trailer header): "+
		"a body without them was cut short. Otherwise the JSON object.", st.ContentType, strings.Join(names, " and "))
	return obj("description", desc, "headers", fields(st.Headers), "content", content, "x-trailers", fields(st.Trailers))
}

// operationID is the name of path's constant without "Path", such as
// "taskGet" for PathTaskGet, or "jobTaskGet" for its job-scoped route.
func (g *generator) operationID(path string, jobScoped bool) string {
	for _, c := range g.docs.consts {
		if c.value == path && strings.HasPrefix(c.name, "Path") {
			id := strings.TrimPrefix(c.name, "Path")
			if jobScoped {
				return "job" + id
			}
			return lowerInitial(id)
		}
	}
	g.t.Fatalf("no Path constant is %q", path)
	return ""
}

// lowerInitial lowers the first word of a Go name, an initialism whole:
// "TaskGet" is "taskGet", "KVGet" is "kvGet".
func lowerInitial(id string) string {
	n := 1
	for n < len(id) && unicode.IsUpper(rune(id[n])) && (n+1 == len(id) || unicode.IsUpper(rune(id[n+1]))) {
		n++
	}
	return strings.ToLower(id[:n]) + id[n:]
}

// componentSchemas returns the schemas defined so far, by name.
func (g *generator) componentSchemas() *object {
	names := make([]string, 0, len(g.schemas))
	for n := range g.schemas {
		names = append(names, n)
	}
	sort.Strings(names)
	out := obj()
	for _, n := range names {
		out.set(n, g.schemas[n])
	}
	return out
}

// schema returns the schema of a value of type t: a reference to
// components/schemas for the package's named types, defined on first use,
// else an inline schema.
func (g *generator) schema(t reflect.Type) *object {
	switch t {
	case timeType:
		return obj("type", "string", "format", "date-time")
	case uuidType:
		return obj("type", "string", "format", "uuid")
	case rawType:
		return obj("description", "Any JSON value, null included.")
	}
	if t.PkgPath() == rpcPkgPath && t.Name() != "" {
		if _, ok := g.schemas[t.Name()]; !ok {
			g.schemas[t.Name()] = obj() // a placeholder, in case a type refers to itself
			g.schemas[t.Name()] = g.define(t)
		}
		return obj("$ref", "#/components/schemas/"+t.Name())
	}
	switch t.Kind() {
	case reflect.String:
		return obj("type", "string")
	case reflect.Bool:
		return obj("type", "boolean")
	case reflect.Int, reflect.Int64:
		return obj("type", "integer", "format", "int64")
	case reflect.Int32:
		return obj("type", "integer", "format", "int32")
	case reflect.Uint32:
		return obj("type", "integer", "format", "uint32", "minimum", 0)
	case reflect.Uint, reflect.Uint64:
		return obj("type", "integer", "format", "uint64", "minimum", 0)
	case reflect.Float64:
		return obj("type", "number", "format", "double")
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			// encoding/json writes a []byte as a base64 string.
			return obj("type", "string", "format", "byte")
		}
		return obj("type", "array", "items", g.schema(t.Elem()))
	case reflect.Map:
		if t.Key().Kind() == reflect.String {
			return obj("type", "object", "additionalProperties", g.schema(t.Elem()))
		}
	case reflect.Pointer:
		return nullable(g.schema(t.Elem()))
	}
	g.t.Fatalf("the generator has no schema for %v: teach it one", t)
	return nil
}

// define returns the schema of one of the package's named types.
func (g *generator) define(t reflect.Type) *object {
	desc := g.docs.types[t.Name()]
	if t == durationType {
		return obj("type", "string", "pattern", durationPattern, "example", "30s", "description", desc)
	}
	if t.Kind() != reflect.Struct {
		g.t.Fatalf("the generator has no schema for %v: teach it one", t)
	}
	props := obj()
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous {
			g.t.Fatalf("%v.%s: embedded fields are not supported by the generator", t, f.Name)
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			g.t.Fatalf("%v.%s has no json name", t, f.Name)
		}
		optional := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
		if !optional {
			required = append(required, name)
		}
		props.set(name, g.property(t, f, optional))
		if earlier, ok := earlierLimitNames[name]; ok && (t == limitsType || t == limitsRequestType) {
			// The renamed limits are also on the wire under their
			// earlier names (limits_json.go).
			props.set(earlier, g.schema(f.Type).set("deprecated", true).set("description",
				fmt.Sprintf("The earlier name of %s, which clients and servers of earlier releases use.", name)))
		}
	}
	return obj("type", "object", "description", desc, "required", required, "properties", props)
}

// property returns the schema of field f of struct t.
func (g *generator) property(t reflect.Type, f reflect.StructField, optional bool) *object {
	s := g.schema(f.Type)
	desc := g.docs.fields[t.Name()][f.Name]
	key := t.Name() + "." + f.Name
	if vals, ok := enums[key]; ok {
		s.set("enum", vals)
	}
	if t == errorType && f.Name == "Code" {
		s.set("enum", g.docs.codeValues())
		desc = g.docs.codesDescription(g.t)
	}
	// Go writes a nil slice without omitempty as null.
	if f.Type.Kind() == reflect.Slice && f.Type != rawType && !optional {
		s = nullable(s)
		desc = strings.TrimSpace(desc + " May be null when empty.")
	}
	if desc == "" {
		return s
	}
	if _, ok := s.vals["$ref"]; ok {
		// OpenAPI 3.0 ignores the siblings of a $ref.
		return obj("allOf", []any{s}, "description", desc)
	}
	if d, ok := s.vals["description"].(string); ok {
		desc += "\n\n" + d
	}
	return s.set("description", desc)
}

// nullable returns s allowing null as well.
func nullable(s *object) *object {
	if _, ok := s.vals["$ref"]; ok {
		return obj("allOf", []any{s}, "nullable", true)
	}
	if _, ok := s.vals["allOf"]; ok || s.vals["type"] != nil {
		return s.set("nullable", true)
	}
	return s // any value, null included
}

func jsonContent(schema *object) *object {
	return obj("application/json", obj("schema", schema))
}

// goDocs are the doc comments of the package's declarations.
type goDocs struct {
	types  map[string]string            // type → doc
	fields map[string]map[string]string // type → field → doc
	consts []constDoc                   // in source order
	vars   map[string]string            // var → doc
	// sentinelOf maps a Code constant to its Err variable, as the
	// sentinels map pairs them.
	sentinelOf map[string]string
}

// constDoc is a constant: its name, its value when it is a string literal,
// and its comment.
type constDoc struct{ name, value, doc string }

// readDocs parses the package's source (this directory, without tests).
func readDocs(t testing.TB) *goDocs {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	pkg, err := doc.NewFromFiles(fset, files, rpcPkgPath, doc.AllDecls|doc.PreserveAST)
	if err != nil {
		t.Fatal(err)
	}
	d := &goDocs{types: map[string]string{}, fields: map[string]map[string]string{}, vars: map[string]string{}, sentinelOf: map[string]string{}}
	consts, vars := pkg.Consts, pkg.Vars
	for _, ty := range pkg.Types {
		consts = append(consts, ty.Consts...)
		vars = append(vars, ty.Vars...)
		d.types[ty.Name] = prose(ty.Doc)
		for _, spec := range ty.Decl.Specs {
			ts, ok := spec.(*ast.TypeSpec)
			if !ok || ts.Name.Name != ty.Name {
				continue
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			fields := map[string]string{}
			for _, f := range st.Fields.List {
				text := f.Doc.Text()
				if text == "" {
					text = f.Comment.Text()
				}
				for _, n := range f.Names {
					fields[n.Name] = prose(text)
				}
			}
			d.fields[ty.Name] = fields
		}
	}
	sort.Slice(consts, func(i, j int) bool { return consts[i].Decl.Pos() < consts[j].Decl.Pos() })
	for _, v := range consts {
		for _, spec := range v.Decl.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				c := constDoc{name: n.Name, doc: prose(specDoc(v.Decl, vs))}
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						c.value, _ = strconv.Unquote(lit.Value)
					}
				}
				d.consts = append(d.consts, c)
			}
		}
	}
	for _, v := range vars {
		for _, spec := range v.Decl.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				d.vars[n.Name] = prose(specDoc(v.Decl, vs))
				if n.Name != "sentinels" || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.CompositeLit)
				if !ok {
					t.Fatal("sentinels is not a composite literal")
				}
				for _, e := range lit.Elts {
					kv := e.(*ast.KeyValueExpr)
					code, ok1 := kv.Key.(*ast.Ident)
					sentinel, ok2 := kv.Value.(*ast.Ident)
					if !ok1 || !ok2 {
						t.Fatalf("sentinels: an element is not constant: variable (%T: %T)", kv.Key, kv.Value)
					}
					d.sentinelOf[code.Name] = sentinel.Name
				}
			}
		}
	}
	if len(d.sentinelOf) == 0 {
		t.Fatal("found no sentinels map")
	}
	return d
}

// specDoc is the comment of one constant or variable: its own doc comment,
// the declaration's when it stands alone, or its line comment.
func specDoc(decl *ast.GenDecl, vs *ast.ValueSpec) string {
	if s := vs.Doc.Text(); s != "" {
		return s
	}
	if !decl.Lparen.IsValid() {
		if s := decl.Doc.Text(); s != "" {
			return s
		}
	}
	return vs.Comment.Text()
}

// prose joins the lines of each paragraph of a comment.
func prose(s string) string {
	paras := strings.Split(strings.TrimSpace(s), "\n\n")
	for i, p := range paras {
		paras[i] = strings.Join(strings.Fields(p), " ")
	}
	return strings.Join(paras, "\n\n")
}

// codes returns the Code constants in source order.
func (d *goDocs) codes() []constDoc {
	var out []constDoc
	for _, c := range d.consts {
		if strings.HasPrefix(c.name, "Code") && c.value != "" {
			out = append(out, c)
		}
	}
	return out
}

func (d *goDocs) codeValues() []string {
	var out []string
	for _, c := range d.codes() {
		out = append(out, c.value)
	}
	return out
}

// leadingStatus matches the status that starts some codes' comments.
var leadingStatus = regexp.MustCompile(`^[0-9]{3}: `)

// codesDescription lists the codes with their status and meaning: the
// comment of the code's sentinel error, else the code's own comment.
func (d *goDocs) codesDescription(t testing.TB) string {
	var b strings.Builder
	b.WriteString("A stable code; the message is for people. The codes, with the status each is sent with:\n")
	for _, c := range d.codes() {
		meaning, status := codeMeanings[c.value], HTTPStatus(c.value)
		if c.value == CodeNotLeader {
			status = http.StatusTemporaryRedirect
		}
		if meaning == "" {
			if v, ok := d.sentinelOf[c.name]; ok {
				meaning = strings.TrimPrefix(d.vars[v], v+" means ")
			}
		}
		if meaning == "" {
			meaning = leadingStatus.ReplaceAllString(c.doc, "")
		}
		if meaning == "" {
			t.Fatalf("%s has no comment, no documented sentinel and no entry in codeMeanings", c.name)
		}
		fmt.Fprintf(&b, "\n- `%s` (%d): %s", c.value, status, strings.TrimSuffix(meaning, "."))
	}
	return b.String()
}

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

// firstDifference describes the first place where the committed document
// (file) and the generated one differ, or returns "".
func firstDifference(file, gen []byte) string {
	var f, g any
	if err := json.Unmarshal(file, &f); err != nil {
		return fmt.Sprintf("the committed document is not valid JSON: %v", err)
	}
	if err := json.Unmarshal(gen, &g); err != nil {
		return fmt.Sprintf("the generated document is not valid JSON: %v", err)
	}
	if d := diffJSON("", f, g); d != "" {
		return d
	}
	if bytes.Equal(file, gen) {
		return ""
	}
	// Same content, other layout: name the first line that differs.
	fl, gl := strings.Split(string(file), "\n"), strings.Split(string(gen), "\n")
	for i := range max(len(fl), len(gl)) {
		var a, b string
		if i < len(fl) {
			a = fl[i]
		}
		if i < len(gl) {
			b = gl[i]
		}
		if a != b {
			return fmt.Sprintf("the same content laid out differently: line %d is %q, the generator writes %q", i+1, a, b)
		}
	}
	return "the same content laid out differently"
}

// diffJSON compares two decoded JSON values, objects key by key in sorted
// order.
func diffJSON(at string, file, gen any) string {
	switch f := file.(type) {
	case map[string]any:
		g, ok := gen.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(f)+len(g))
		for k := range f {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := f[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			fv, inFile := f[k]
			gv, inGen := g[k]
			switch {
			case !inGen:
				return fmt.Sprintf("at %s: the document has %s, which the Go code no longer gives", orRoot(jsonPath(at, k)), short(fv))
			case !inFile:
				return fmt.Sprintf("at %s: the Go code gives %s, which the document lacks", orRoot(jsonPath(at, k)), short(gv))
			}
			if d := diffJSON(jsonPath(at, k), fv, gv); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := gen.([]any)
		if !ok {
			break
		}
		for i := range min(len(f), len(g)) {
			if d := diffJSON(fmt.Sprintf("%s[%d]", at, i), f[i], g[i]); d != "" {
				return d
			}
		}
		if len(f) != len(g) {
			return fmt.Sprintf("at %s: the document has %d elements where the Go code gives %d", orRoot(at), len(f), len(g))
		}
		return ""
	}
	if reflect.DeepEqual(file, gen) {
		return ""
	}
	if fs, ok := file.(string); ok {
		if gs, ok := gen.(string); ok {
			// Long texts: show where they part.
			i := 0
			for i < len(fs) && i < len(gs) && fs[i] == gs[i] {
				i++
			}
			from := max(0, i-30)
			return fmt.Sprintf("at %s, from byte %d: the document has %s where the Go code gives %s",
				orRoot(at), i, short(fs[from:]), short(gs[from:]))
		}
	}
	return fmt.Sprintf("at %s: the document has %s where the Go code gives %s", orRoot(at), short(file), short(gen))
}

// plainKey matches the keys that jsonPath writes as .key.
var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// jsonPath appends key k to path at: .k for a plain name, else ["k"].
func jsonPath(at, k string) string {
	if plainKey.MatchString(k) {
		if at == "" {
			return k
		}
		return at + "." + k
	}
	return at + "[" + strconv.Quote(k) + "]"
}

func orRoot(at string) string {
	if at == "" {
		return "the top level"
	}
	return at
}

// short is v as JSON, cut to a readable length.
func short(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	b := bytes.TrimSpace(buf.Bytes())
	if len(b) > 120 {
		return string(b[:120]) + "..."
	}
	return string(b)
}

// walkJSON calls fn for v and everything inside it.
func walkJSON(at string, v any, fn func(at string, v any)) {
	fn(at, v)
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			walkJSON(jsonPath(at, k), e, fn)
		}
	case []any:
		for i, e := range v {
			walkJSON(fmt.Sprintf("%s[%d]", at, i), e, fn)
		}
	}
}

// resolvePointer resolves a local reference such as
// "#/components/schemas/Chunk" in document d.
func resolvePointer(d any, ref string) (any, error) {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("not a local reference")
	}
	cur := d
	for _, tok := range strings.Split(p, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%q is inside a value that is not an object", tok)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("no %q", tok)
		}
	}
	return cur, nil
}
