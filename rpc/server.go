package rpc

import (
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Server is the HTTP/JSON API of one replica. It implements http.Handler
// and serves every path in this package's Path constants over a Backend.
type Server struct {
	b   Backend
	cfg ServerConfig
	log hclog.Logger
	// routes maps a path to its method and handler.
	routes map[string]route
	// watchWaiting, when set (by tests), is called each time a watch is
	// about to block.
	watchWaiting func()
	// datasetSlot is a one-slot semaphore held while a dataset is checked,
	// indexed and proposed, so that concurrent SetDataset calls on this
	// node install it once and the rest find it set.
	datasetSlot chan struct{}
}

// route is the one method a path accepts and its handler. A handler
// returns an error for the response instead of writing one itself.
type route struct {
	method string
	h      func(w http.ResponseWriter, r *http.Request) error
}

// NewServer returns a Server over b. Zero fields of cfg take their
// defaults; a nil logger discards the logs.
func NewServer(b Backend, cfg ServerConfig, logger hclog.Logger) *Server {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &Server{b: b, cfg: cfg.withDefaults(), log: logger, datasetSlot: make(chan struct{}, 1)}
	s.routes = map[string]route{
		PathDataset:         {http.MethodPost, s.handleSetDataset},
		PathTaskGet:         {http.MethodPost, s.handleGetTask},
		PathTaskFinished:    {http.MethodPost, s.handleTaskFinished},
		PathTaskFailed:      {http.MethodPost, s.handleTaskFailed},
		PathTaskRenew:       {http.MethodPost, s.handleTaskRenew},
		PathSaveModel:       {http.MethodPost, s.handleSaveModel},
		PathAllgatherJoin:   {http.MethodPost, s.handleJoin},
		PathAllgatherLeave:  {http.MethodPost, s.handleLeave},
		PathAllgatherWatch:  {http.MethodGet, s.handleWatch},
		PathStatus:          {http.MethodGet, s.handleStatus},
		PathCluster:         {http.MethodGet, s.handleCluster},
		PathClusterJoin:     {http.MethodPost, s.handleClusterJoin},
		PathClusterRemove:   {http.MethodPost, s.handleClusterRemove},
		PathClusterTransfer: {http.MethodPost, s.handleClusterTransfer},
		PathDebugState:      {http.MethodGet, s.handleDebugState},
		PathHealthz:         {http.MethodGet, s.handleHealthz},
		PathReadyz:          {http.MethodGet, s.handleReadyz},
	}
	return s
}

// ServeHTTP routes the request, writes the handler's error if it returns
// one and logs the request at debug level (never its body).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w}
	s.serve(rec, r)
	if s.log.IsDebug() {
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
			"duration", time.Since(start), "remote", r.RemoteAddr,
			"request_id", r.Header.Get(HeaderRequestID))
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rt, ok := s.routes[r.URL.Path]
	if !ok {
		s.fail(w, r, Errorf(CodeNotFound, "no endpoint %s", r.URL.Path))
		return
	}
	method := r.Method
	if method == http.MethodHead && rt.method == http.MethodGet {
		method = http.MethodGet
	}
	if method != rt.method {
		allow := rt.method
		if rt.method == http.MethodGet {
			allow += ", " + http.MethodHead
		}
		w.Header().Set("Allow", allow)
		s.fail(w, r, Errorf(CodeMethod, "method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow))
		return
	}
	if err := rt.h(w, r); err != nil {
		s.fail(w, r, err)
	}
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
