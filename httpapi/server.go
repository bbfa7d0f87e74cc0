package httpapi

import (
	"context"
	"encoding/hex"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/auth"
	"github.com/raftmaster/raftmaster/internal/quota"
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
	// writes and clients are the quotas of Config.WriteQuota and
	// Config.ClientQuota, nil when off.
	writes, clients *quota.Limiter
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
	h := &Handler{b: b, cfg: cfg.withDefaults(), log: logger, mux: http.NewServeMux(),
		writes: quota.New(cfg.WriteQuota), clients: quota.New(cfg.ClientQuota)}
	h.route(rpc.Endpoints, map[string]handlerFunc{
		rpc.PathDataset:             h.handleSetDataset,
		rpc.PathWeights:             h.handleSetWeights,
		rpc.PathTaskGet:             h.handleGetTask,
		rpc.PathTaskFinished:        h.handleTaskFinished,
		rpc.PathTaskFailed:          h.handleTaskFailed,
		rpc.PathTaskRenew:           h.handleTaskRenew,
		rpc.PathSaveModel:           h.handleSaveModel,
		rpc.PathAllgatherJoin:       h.handleJoin,
		rpc.PathAllgatherLeave:      h.handleLeave,
		rpc.PathAllgatherWatch:      h.handleWatch,
		rpc.PathStatus:              h.handleStatus,
		rpc.PathCluster:             h.handleCluster,
		rpc.PathClusterAddMember:    h.handleAddMember,
		rpc.PathClusterRemoveMember: h.handleRemoveMember,
		rpc.PathClusterTransfer:     h.handleClusterTransfer,
		rpc.PathDebugState:          h.handleDebugState,
		rpc.PathHealthz:             h.handleHealthz,
		rpc.PathReadyz:              h.handleReadyz,
		rpc.PathJobs:                h.handleJobs,
		rpc.PathJob:                 h.handleJob,
		rpc.PathJobCreate:           h.handleJobCreate,
		rpc.PathJobDelete:           h.handleJobDelete,
		rpc.PathBackup:              h.handleBackup,
		rpc.PathKVGet:               h.handleKVGet,
		rpc.PathKVCompareAndSet:     h.handleKVCompareAndSet,
		rpc.PathKVDelete:            h.handleKVDelete,
		rpc.PathKVDeletePrefix:      h.handleKVDeletePrefix,
		rpc.PathKVAdd:               h.handleKVAdd,
		rpc.PathKVMultiSet:          h.handleKVMultiSet,
		rpc.PathKVAppend:            h.handleKVAppend,
		rpc.PathKVCompareValue:      h.handleKVCompareValue,
		rpc.PathKVMultiGet:          h.handleKVMultiGet,
		rpc.PathKVNumKeys:           h.handleKVNumKeys,
		rpc.PathKVWatch:             h.handleKVWatch,
		rpc.PathLimits:              h.handleLimits,
		rpc.PathLimitsSet:           h.handleLimitsSet,
		// The methods of a path that several serve have a handler each.
		http.MethodPost + " " + rpc.PathSessions: h.handleOpenSession,
		http.MethodGet + " " + rpc.PathSessions:  h.handleSessions,
		rpc.PathSessionKeepAlive:                 h.handleSessionKeepAlive,
		rpc.PathSession:                          h.handleCloseSession,
		rpc.PathTaskProgress:                     h.handleReportProgress,
		http.MethodPost + " " + rpc.PathCursors:  h.handleCommitCursor,
		http.MethodGet + " " + rpc.PathCursors:   h.handleCursors,
		http.MethodGet + " " + rpc.PathCursor:    h.handleCursor,
		http.MethodDelete + " " + rpc.PathCursor: h.handleDeleteCursor,
		rpc.PathCursorRestore:                    h.handleRestoreCursor,
	})
	return h
}

// route registers each endpoint's method and path (rpc.Endpoints, which
// rpc/openapi.json is generated from) with the handler of its path, or,
// on a path that several methods serve, of its "METHOD path"; every other
// method of the path is answered 405, and every other path 404. An
// endpoint without a handler, or a handler without an endpoint, is a
// programming error: route panics.
func (h *Handler) route(endpoints []rpc.Endpoint, handlers map[string]handlerFunc) {
	allowed := map[string][]string{} // the methods of each path
	for _, ep := range endpoints {
		allowed[ep.Path] = append(allowed[ep.Path], ep.Method)
	}
	routed := make(map[string]bool, len(endpoints))
	for _, ep := range endpoints {
		key := ep.Method + " " + ep.Path
		if _, ok := handlers[key]; !ok {
			key = ep.Path
		}
		fn, ok := handlers[key]
		if !ok {
			panic("httpapi: no handler for " + ep.Method + " " + ep.Path)
		}
		if strings.Contains(ep.Path, "{"+rpc.JobParam+"}") {
			fn = checkJob(fn)
		}
		routed[key] = true
		if ep.Method == http.MethodPost && ep.Redirects {
			fn = h.leaderFirst(fn)
		}
		// "GET /path" serves HEAD too; the bare path, less specific,
		// catches every other method.
		fn = h.authorize(ep, fn)
		first := allowed[ep.Path][0] == ep.Method
		h.mux.Handle(ep.Method+" "+ep.Path, h.serve(fn))
		if first {
			h.mux.Handle(ep.Path, h.serve(methodNotAllowed(allowed[ep.Path])))
		}
		if ep.Job {
			path := rpc.JobPath("{"+rpc.JobParam+"}", ep.Path)
			h.mux.Handle(ep.Method+" "+path, h.serve(checkJob(fn)))
			if first {
				h.mux.Handle(path, h.serve(methodNotAllowed(allowed[ep.Path])))
			}
		}
	}
	for key := range handlers {
		if !routed[key] {
			panic("httpapi: a handler for " + key + ", which no endpoint names")
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

// methodNotAllowed answers 405 naming the methods a path accepts, HEAD
// after GET.
func methodNotAllowed(methods []string) handlerFunc {
	var names []string
	for _, m := range methods {
		names = append(names, m)
		if m == http.MethodGet {
			names = append(names, http.MethodHead)
		}
	}
	allow := strings.Join(names, ", ")
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

// grantKey is the context key of the auth.Grant of a request's token.
type grantKey struct{}

// grantOf returns the grant of r's token, and false when the server
// requires no tokens (or the endpoint is public).
func grantOf(r *http.Request) (auth.Grant, bool) {
	g, ok := r.Context().Value(grantKey{}).(auth.Grant)
	return g, ok
}

// authorize wraps fn with the token check of endpoint ep when the server
// requires tokens (rpc.Endpoint.Access): no known token is 401, a role
// that may not is 403, as is a job the token does not cover, and none
// reaches fn. A write then passes the quotas (admit).
func (h *Handler) authorize(ep rpc.Endpoint, fn handlerFunc) handlerFunc {
	if ep.Write {
		fn = h.admit(fn)
	}
	if h.cfg.Tokens == nil || ep.Access == rpc.AccessPublic {
		return fn
	}
	need := auth.Trainer
	if ep.Access == rpc.AccessOperator {
		need = auth.Operator
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		token, ok := strings.CutPrefix(r.Header.Get(rpc.HeaderAuthorization), "Bearer ")
		if !ok || token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="raftmaster"`)
			return rpc.Errorf(rpc.CodeUnauthorized, "this server requires a bearer token (Authorization: Bearer ...)")
		}
		g, known := h.cfg.Tokens.Lookup(token)
		if !known {
			w.Header().Set("WWW-Authenticate", `Bearer realm="raftmaster", error="invalid_token"`)
			return rpc.Errorf(rpc.CodeUnauthorized, "unknown token")
		}
		if !g.Role.Allows(need) {
			return rpc.Errorf(rpc.CodeForbidden, "the %s role may not use %s %s; it needs the %s role", g.Role, r.Method, r.URL.Path, need)
		}
		if ep.Job {
			if job := jobOf(r); !g.Covers(job) {
				return rpc.Errorf(rpc.CodeForbidden, "this token does not cover job %q (its jobs are set in the server's token file)", job)
			}
		}
		return fn(w, r.WithContext(context.WithValue(r.Context(), grantKey{}, g)))
	}
}

// admit wraps the handler of a write with the quotas, on the leader only
// (a follower redirects the write, and the leader counts it): a request
// id whose client another token created is refused 403 foreign_client; a
// write past its token's write quota, or a new client id past its
// token's identity quota, is answered 429 rate_limited with Retry-After.
// None of them changes anything.
func (h *Handler) admit(fn handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if l, ok := h.b.Leader(); !ok || l.ID != h.b.NodeID() {
			return fn(w, r)
		}
		g, tokens := grantOf(r)
		key := ""
		if tokens {
			key = hex.EncodeToString(g.Owner[:])
		} else if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			key = host
		} else {
			key = r.RemoteAddr
		}
		req, err := parseRequestID(r)
		if err != nil {
			return err
		}
		newClient := false
		if !req.IsZero() {
			owner, held := h.b.FSM().ClientOwner(req.Client)
			if tokens && held && owner != [16]byte{} && owner != g.Owner {
				return rpc.Errorf(rpc.CodeForeignClient, "request id %s/%d: %v", req.Client, req.Seq, rpc.ErrForeignClient)
			}
			newClient = !held
		}
		if newClient {
			if ok, wait := h.clients.Take(key, 1); !ok {
				return rateLimited(w, "new client identities", wait)
			}
		}
		if ok, wait := h.writes.Take(key, 1); !ok {
			return rateLimited(w, "writes", wait)
		}
		return fn(w, r)
	}
}

// rateLimited answers 429 with Retry-After.
func rateLimited(w http.ResponseWriter, what string, wait time.Duration) error {
	w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)))
	return rpc.Errorf(rpc.CodeRateLimited, "over this token's quota of %s; retry with the same request id after %v", what, wait)
}

// ownerOf returns the owner that r's request ids carry: its token's hash
// once the cluster is at fsm.Protocol3, else none.
func (h *Handler) ownerOf(r *http.Request) [16]byte {
	g, ok := grantOf(r)
	if !ok || h.b.FSM().Protocol() < fsm.Protocol3 {
		return [16]byte{}
	}
	return g.Owner
}
