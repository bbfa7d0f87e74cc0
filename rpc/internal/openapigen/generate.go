package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/rpc"
)

// openAPIDescription is the document's top-level description (Markdown).
var openAPIDescription = strings.Join([]string{
	"The HTTP/JSON API of raftmaster, a Raft-replicated master for ML training jobs. " +
		"This document is generated from the Go package github.com/raftmaster/raftmaster/rpc " +
		"by `go generate ./rpc`; do not edit it by hand.",
	"",
	"- **Any node answers.** A request that needs the leader, sent to a node that does not lead, is answered " +
		"307 Temporary Redirect with Location set to the same path and query on the leader: send it again there, " +
		"with the same body and headers. During an election the node holds the request until a leader serves, up to a few seconds, " +
		"then redirects; only then does a node that knows no leader answer 503 with code `no_leader`. " +
		"A client may list in the " + rpc.HeaderUnreachable + " header the API addresses that just refused its connections, " +
		"so that no node redirects it to a dead leader. Every answer names the node that gave it in the " + rpc.HeaderNode + " header.",
	"- **Retry-After.** A 503 `no_leader`, `unavailable` or `too_many_clients` carries Retry-After (in seconds): retry after it. " +
		"`unknown_outcome` carries none: retry at once, with the same request id.",
	"- **Request ids.** A write (an operation that takes the " + rpc.HeaderRequestID + " header) carries " +
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
	"- **Sessions** (protocol level 6). A client process may open a session (POST " + rpc.PathSessions + ") and keep it alive " +
		"(POST " + rpc.PathSessionKeepAlive + "); the writes it makes under the session carry its id in the " + rpc.HeaderSession +
		" header. The tasks it leases under it need no renewal, and with `" + rpc.ParamAttach + "=true` the register keys it stores are " +
		"attached to it: all are released in one entry when the session is closed or expires. A write under an ended session is " +
		"answered 410 `session_expired`.",
	"- **Durations** are Go duration strings such as `30s` or `1m30s`.",
	"- **Bodies** are one JSON object with snake_case keys; a request body with an unknown key is refused (400 `invalid`). " +
		"Errors are JSON objects with a stable code and a message for people.",
}, "\n")

// enums are the values of string fields that take a fixed set, keyed by
// "Type.Field".
var enums = map[string][]string{
	"WatchResponse.Status": {rpc.WatchPending, rpc.WatchComplete},
}

// codeMeanings says what the codes whose comment does not (or does not
// fit the enum's list) mean.
var codeMeanings = map[string]string{
	rpc.CodeNotLeader: "this node is not the leader: the body of a 307 redirect to the leader (Location)",
	rpc.CodeMethod:    "the path does not take this method; Allow lists the one it does",
	rpc.CodeInternal:  "an unexpected server error",
}

// durationPattern matches the Go duration strings that time.ParseDuration
// reads, such as "30s", "1m30s", "1.5h" or "-250ms".
const durationPattern = `^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`

// requestIDPattern matches a request id, "<client uuid>/<sequence>".
const requestIDPattern = `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}/[0-9]+$`

// generate returns the document, pretty-printed, from rpc's tables and
// types and from the doc comments of the package's source in dir.
func generate(dir string) (doc []byte, err error) {
	docs, err := readDocs(dir)
	if err != nil {
		return nil, err
	}
	if err := docs.check(); err != nil {
		return nil, err
	}
	defer func() {
		switch r := recover().(type) {
		case nil:
		case failure:
			doc, err = nil, r
		default:
			panic(r)
		}
	}()
	g := &generator{docs: docs, schemas: map[string]*object{}}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(g.document()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// failure is what failf panics with and generate returns: something in
// package rpc the generator cannot write down.
type failure struct{ msg string }

func (f failure) Error() string { return f.msg }

// failf stops the generation with an error.
func failf(format string, args ...any) {
	panic(failure{fmt.Sprintf(format, args...)})
}

// The Go types with a schema of their own.
var (
	rpcPkgPath   = reflect.TypeFor[rpc.Endpoint]().PkgPath()
	timeType     = reflect.TypeFor[time.Time]()
	uuidType     = reflect.TypeFor[uuid.UUID]()
	rawType      = reflect.TypeFor[json.RawMessage]()
	durationType = reflect.TypeFor[rpc.Duration]()
	errorType    = reflect.TypeFor[rpc.Error]()
	// limitsType and limitsRequestType carry renamed limits.
	limitsType        = reflect.TypeFor[rpc.Limits]()
	limitsRequestType = reflect.TypeFor[rpc.LimitsRequest]()
)

// generator builds the document.
type generator struct {
	docs *goDocs
	// schemas are the components/schemas, by name.
	schemas map[string]*object
}

func (g *generator) document() *object {
	paths := obj()
	ids := map[string]bool{}
	// add sets the operation of ep at path, beside those of the other
	// methods that serve the path.
	add := func(ep rpc.Endpoint, path string) {
		item, ok := paths.vals[path].(*object)
		if !ok {
			item = obj()
			paths.set(path, item)
		}
		op := g.operation(ep, path)
		if id := op.vals["operationId"].(string); ids[id] {
			failf("%s %s: operationId %q names another operation too: give the endpoint an Operation", ep.Method, path, id)
		} else {
			ids[id] = true
		}
		item.set(strings.ToLower(ep.Method), op)
	}
	for _, ep := range rpc.Endpoints {
		add(ep, ep.Path)
	}
	// The job-scoped endpoints again, under each job's prefix.
	for _, ep := range rpc.Endpoints {
		if ep.Job {
			add(ep, rpc.JobPath("{"+rpc.JobParam+"}", ep.Path))
		}
	}
	errorRef := g.schema(errorType)
	components := obj(
		"schemas", g.componentSchemas(),
		"parameters", obj("RequestID", obj(
			"name", rpc.HeaderRequestID,
			"in", "header",
			"required", false,
			"description", "`<client uuid>/<sequence>`: the client's id and a new sequence number for each request, "+
				"the same on every retry of it. A retry with the same id, within the de-duplication window, is answered with the "+
				"first outcome and changes nothing. Without it the write is not de-duplicated.",
			"schema", obj("type", "string", "pattern", requestIDPattern),
			"example", "6f1c2f4e-8a77-4c1e-9d43-2b0a6a9e5c11/42",
		), "Session", obj(
			"name", rpc.HeaderSession,
			"in", "header",
			"required", false,
			"description", "The id of the session the write is made under (POST "+rpc.PathSessions+"), in decimal. "+
				"The write needs a request id too, whose client id is bound to the session of its first request: "+
				"send the writes of one session under client ids of its own. A write under a session that has ended is "+
				"answered 410 `session_expired` and changes nothing; every write under it counts as a keep-alive. "+
				"Needs protocol level 6: a cluster below it answers unavailable.",
			"schema", obj("type", "integer", "format", "uint64", "minimum", 1),
			"example", 42,
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
func (g *generator) operation(ep rpc.Endpoint, path string) *object {
	summary, rest, _ := strings.Cut(ep.Summary, ". ")
	if rest != "" {
		summary += "."
	}
	var notes []string
	if rest != "" {
		notes = append(notes, rest)
	}
	if ep.Write {
		notes = append(notes, "A write: send "+rpc.HeaderRequestID+"; a retry with the same id is answered with the first outcome and changes nothing.")
	}
	if ep.Redirects {
		notes = append(notes, "A node that does not lead may answer 307 to the leader.")
	}
	var params []any
	if strings.Contains(path, "{"+rpc.JobParam+"}") {
		params = append(params, obj(
			"name", rpc.JobParam,
			"in", "path",
			"required", true,
			"description", "The job: 1 to 63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit. "+
				"The same endpoint outside /v1/jobs/{job} serves the job named "+rpc.DefaultJob+".",
			"schema", obj("type", "string", "pattern", "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"),
		))
	} else if ep.Job {
		notes = append(notes, "Serves the job named "+rpc.DefaultJob+"; "+rpc.JobPath("{"+rpc.JobParam+"}", ep.Path)+" serves any job.")
	}
	if strings.Contains(path, "{"+rpc.SessionParam+"}") {
		params = append(params, obj(
			"name", rpc.SessionParam,
			"in", "path",
			"required", true,
			"description", "The session, by the id its opening answered.",
			"schema", obj("type", "integer", "format", "uint64", "minimum", 1),
		))
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
		if !ep.NoSession {
			params = append(params, obj("$ref", "#/components/parameters/Session"))
		}
	}
	op := obj(
		"operationId", g.operationID(ep, path != ep.Path),
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
		s := rpc.HTTPStatus(c)
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
func (g *generator) okResponse(ep rpc.Endpoint) *object {
	content := jsonContent(g.schema(reflect.TypeOf(ep.Response)))
	if ep.Stream == nil {
		return obj("description", "OK", "content", content)
	}
	st := ep.Stream
	content.set(st.ContentType, obj("schema", obj("type", "string", "format", "binary", "description", st.Doc)))
	// Sent with the stream only, so required by neither answer.
	fields := func(ps []rpc.Param) *object {
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

// operationID is ep's Operation, or else the name of its path's constant
// without "Path", such as "taskGet" for PathTaskGet; "jobTaskGet" for its
// job-scoped route.
func (g *generator) operationID(ep rpc.Endpoint, jobScoped bool) string {
	if ep.Operation != "" {
		if jobScoped {
			return "job" + strings.ToUpper(ep.Operation[:1]) + ep.Operation[1:]
		}
		return ep.Operation
	}
	for _, c := range g.docs.consts {
		if c.value == ep.Path && strings.HasPrefix(c.name, "Path") {
			id := strings.TrimPrefix(c.name, "Path")
			if jobScoped {
				return "job" + id
			}
			return lowerInitial(id)
		}
	}
	failf("no Path constant is %q", ep.Path)
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
	failf("the generator has no schema for %v: teach it one", t)
	return nil
}

// define returns the schema of one of the package's named types.
func (g *generator) define(t reflect.Type) *object {
	desc := g.docs.types[t.Name()]
	if t == durationType {
		return obj("type", "string", "pattern", durationPattern, "example", "30s", "description", desc)
	}
	if t.Kind() != reflect.Struct {
		failf("the generator has no schema for %v: teach it one", t)
	}
	props := obj()
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous {
			failf("%v.%s: embedded fields are not supported by the generator", t, f.Name)
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			failf("%v.%s has no json name", t, f.Name)
		}
		optional := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
		if !optional {
			required = append(required, name)
		}
		props.set(name, g.property(t, f, optional))
		if earlier, ok := rpc.EarlierLimitName(name); ok && (t == limitsType || t == limitsRequestType) {
			// The renamed limits are also on the wire under their
			// earlier names (rpc/limits_json.go).
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
		desc = g.docs.codesDescription()
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
