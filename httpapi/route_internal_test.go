package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/rpc"
)

// route panics on an endpoint without a handler and on a handler without
// an endpoint.
func TestRouteMismatchPanics(t *testing.T) {
	noop := func(http.ResponseWriter, *http.Request) error { return nil }
	cases := []struct {
		name      string
		endpoints []rpc.Endpoint
		handlers  map[string]handlerFunc
		want      string
	}{
		{"endpoint without handler", []rpc.Endpoint{{Method: http.MethodGet, Path: "/v1/a"}, {Method: http.MethodPost, Path: "/v1/b"}},
			map[string]handlerFunc{"/v1/a": noop}, "no handler for POST /v1/b"},
		{"handler without endpoint", []rpc.Endpoint{{Method: http.MethodGet, Path: "/v1/a"}},
			map[string]handlerFunc{"/v1/a": noop, "/v1/c": noop}, "/v1/c"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, tc.want) {
					t.Errorf("panic %q, want one naming %q", msg, tc.want)
				}
			}()
			h := &Handler{log: hclog.NewNullLogger(), mux: http.NewServeMux()}
			h.route(tc.endpoints, tc.handlers)
		})
	}
}
