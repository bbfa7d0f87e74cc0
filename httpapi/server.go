package httpapi

import (
	"github.com/raftmaster/raftmaster/internal/auth"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/rpc"
)

// Handler is the HTTP/JSON API of one replica: it serves every path of the
// wire contract (package rpc) over a Backend.
type Handler struct {
	b   Backend
	cfg Config
	log hclog.Logger
	mux *http.ServeMux
	// watchWaiting, when set (by tests), is called each time a watch is
	// about to block.
	watchWaiting func()
	// datasetSlots holds a one-slot semaphore per job while its dataset is
	// checked, indexed and proposed, so that concurrent SetDataset calls
	// of a job on this node install it once and the rest find it set,
	// while other jobs' calls go on.
	datasetSlots datasetSlots
	// limitsMu serialises the changes of the limits on this node, each a
	// read of the record and a proposal of it changed.
	limitsMu sync.Mutex
}

// handlerFunc handles one route. It returns an error for the response
// instead of writing one itself.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// NewHandler returns a Handler over b. Zero fields of cfg take their
// defaults; a nil logger discards the logs.
func NewHandler(b Backend, cfg Config, logger hclog.Logger) *Handler {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	h := &Handler{b: b, cfg: cfg.withDefaults(), log: logger, mux: http.NewServeMux()}
	h.route(rpc.Endpoints, map[string]handlerFunc{
		rpc.PathDataset:         h.handleSetDataset,
		rpc.PathTaskGet:         h.handleGetTask,
		rpc.PathTaskFinished:    h.handleTaskFinished,
		rpc.PathTaskFailed:      h.handleTaskFailed,
		rpc.PathTaskRenew:       h.handleTaskRenew,
		rpc.PathSaveModel:       h.handleSaveModel,
		rpc.PathAllgatherJoin:   h.handleJoin,
		rpc.PathAllgatherLeave:  h.handleLeave,
		rpc.PathAllgatherWatch:  h.handleWatch,
		rpc.PathStatus:          h.handleStatus,
		rpc.PathCluster:         h.handleCluster,
		rpc.PathClusterAddVoter: h.handleAddVoter,
		rpc.PathClusterRemove:   h.handleClusterRemove,
		rpc.PathClusterTransfer: h.handleClusterTransfer,
		rpc.PathDebugState:      h.handleDebugState,
		rpc.PathHealthz:         h.handleHealthz,
		rpc.PathReadyz:          h.handleReadyz,
		rpc.PathJobs:            h.handleJobs,
		rpc.PathJob:             h.handleJob,
		rpc.PathJobCreate:       h.handleJobCreate,
		rpc.PathJobDelete:       h.handleJobDelete,
		rpc.PathBackup:          h.handleBackup,
		rpc.PathKVGet:           h.handleKVGet,
		rpc.PathKVCompareAndSet: h.handleKVCompareAndSet,
		rpc.PathLimits:          h.handleLimits,
		rpc.PathLimitsSet:       h.handleLimitsSet,
	})
	return h
}

// route registers each endpoint's method and path (rpc.Endpoints, which
// rpc/openapi.json is generated from) with the handler of its path, and
// answers 404 everywhere else. An endpoint without a handler, or a handler
// without an endpoint, is a programming error: route panics.
func (h *Handler) route(endpoints []rpc.Endpoint, handlers map[string]handlerFunc) {
	routed := make(map[string]bool, len(endpoints))
	for _, ep := range endpoints {
		if fn, ok := handlers[ep.Path]; ok && strings.Contains(ep.Path, "{"+rpc.JobParam+"}") {
			handlers[ep.Path] = checkJob(fn)
		}
	}
	for _, ep := range endpoints {
		fn, ok := handlers[ep.Path]
		if !ok {
			panic("httpapi: no handler for " + ep.Method + " " + ep.Path)
		}
		routed[ep.Path] = true
		if ep.Method == http.MethodPost && ep.Redirects {
			fn = h.leaderFirst(fn)
		}
		// "GET /path" serves HEAD too; the bare path, less specific,
		// catches every other method.
		fn = h.authorize(ep.Access, fn)
		h.mux.Handle(ep.Method+" "+ep.Path, h.serve(fn))
		h.mux.Handle(ep.Path, h.serve(methodNotAllowed(ep.Method)))
		if ep.Job {
			path := rpc.JobPath("{"+rpc.JobParam+"}", ep.Path)
			h.mux.Handle(ep.Method+" "+path, h.serve(checkJob(fn)))
			h.mux.Handle(path, h.serve(methodNotAllowed(ep.Method)))
		}
	}
	for path := range handlers {
		if !routed[path] {
			panic("httpapi: a handler for " + path + ", which no endpoint names")
		}
	}
	h.mux.Handle("/", h.serve(func(w http.ResponseWriter, r *http.Request) error {
		return rpc.Errorf(rpc.CodeNotFound, "no endpoint %s", r.URL.Path)
	}))
}

// leaderFirst wraps the handler of a request that only the leader
// serves: a node that knows another node leads, or knows no leader,
// redirects (or answers no_leader) before it reads a byte of the body, so
// that a follower never buffers or decodes what the leader is to handle.
// The body is left unread; net/http closes the connection rather than
// read a large one to its end.
func (h *Handler) leaderFirst(fn handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if l, ok := h.b.Leader(); !ok || l.ID != h.b.NodeID() {
			return ErrNotLeader
		}
		return fn(w, r)
	}
}

// methodNotAllowed answers 405 naming the method a path accepts.
func methodNotAllowed(method string) handlerFunc {
	allow := method
	if method == http.MethodGet {
		allow += ", " + http.MethodHead
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Allow", allow)
		return rpc.Errorf(rpc.CodeMethod, "method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow)
	}
}

// ServeHTTP routes the request and logs it at debug level (never its
// body).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	w.Header().Set(rpc.HeaderNode, h.b.NodeID())
	rec := &statusRecorder{ResponseWriter: w}
	h.mux.ServeHTTP(rec, r)
	if h.cfg.Observer != nil {
		h.cfg.Observer.Request(r.Pattern, rec.status, time.Since(start))
	}
	if h.log.IsDebug() {
		h.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
			"duration", time.Since(start), "remote", r.RemoteAddr,
			"request_id", r.Header.Get(rpc.HeaderRequestID))
	}
}

// serve adapts fn to http.Handler, writing the error it returns.
func (h *Handler) serve(fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			h.fail(w, r, err)
		}
	})
}

// statusRecorder remembers the status code for the request log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the status.
func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200.
func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// authorize wraps fn with the token check of an endpoint of the given
// access level (rpc.Endpoint.Access) when the server requires tokens: no
// known token is 401, a role that may not is 403, and neither reaches fn.
func (h *Handler) authorize(access string, fn handlerFunc) handlerFunc {
	if h.cfg.Tokens == nil || access == rpc.AccessPublic {
		return fn
	}
	need := auth.Trainer
	if access == rpc.AccessOperator {
		need = auth.Operator
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		token, ok := strings.CutPrefix(r.Header.Get(rpc.HeaderAuthorization), "Bearer ")
		if !ok || token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="raftmaster"`)
			return rpc.Errorf(rpc.CodeUnauthorized, "this server requires a bearer token (Authorization: Bearer ...)")
		}
		role, known := h.cfg.Tokens.Role(token)
		if !known {
			w.Header().Set("WWW-Authenticate", `Bearer realm="raftmaster", error="invalid_token"`)
			return rpc.Errorf(rpc.CodeUnauthorized, "unknown token")
		}
		if !role.Allows(need) {
			return rpc.Errorf(rpc.CodeForbidden, "the %s role may not use %s %s; it needs the %s role", role, r.Method, r.URL.Path, need)
		}
		return fn(w, r)
	}
}
