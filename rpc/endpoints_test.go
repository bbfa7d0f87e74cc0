package rpc

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestEndpoints checks the table against the error codes and against
// itself. (The generator of openapi.json checks it against the Path
// constants.)
func TestEndpoints(t *testing.T) {
	known := map[string]bool{}
	for _, c := range ErrorCodes {
		known[c.Code] = true
	}
	seen := map[string]bool{}
	operations := map[string]string{}
	for _, ep := range Endpoints {
		name := ep.Method + " " + ep.Path
		if seen[name] {
			t.Errorf("%s: two endpoints", name)
		}
		seen[name] = true
		if ep.Operation != "" {
			if other, ok := operations[ep.Operation]; ok {
				t.Errorf("%s: operation %q names %s too", name, ep.Operation, other)
			}
			operations[ep.Operation] = name
		}
		switch ep.Method {
		case http.MethodGet:
			if ep.Request != nil || ep.Write {
				t.Errorf("%s: a GET takes no body and is no write", name)
			}
		case http.MethodPost:
			if ep.Request == nil {
				t.Errorf("%s: a POST takes a body", name)
			}
		case http.MethodDelete:
			if ep.Request != nil || len(ep.Query) > 0 {
				t.Errorf("%s: a DELETE takes no body and no query", name)
			}
		default:
			t.Errorf("%s: method is not GET, POST or DELETE", name)
		}
		if ep.NoSession && !ep.Write {
			t.Errorf("%s: NoSession marks a write", name)
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
				t.Errorf("%s: error %q is not in ErrorCodes", name, c)
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
	methods := map[string]int{}
	for _, ep := range Endpoints {
		methods[ep.Path]++
	}
	for _, ep := range Endpoints {
		if methods[ep.Path] > 1 && ep.Operation == "" {
			t.Errorf("%s %s: the path has %d endpoints, and this one no Operation to tell it apart", ep.Method, ep.Path, methods[ep.Path])
		}
	}
}
