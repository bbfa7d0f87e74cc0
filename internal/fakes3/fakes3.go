// Package fakes3 is an in-memory S3-compatible server for tests, on
// gofakes3: it checks the access key id each request is signed with (not
// the signature), so that tests can see bad credentials refused, and
// counts the requests it serves.
package fakes3

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is an in-memory S3 server as an http.Handler.
type Server struct {
	accessKey string
	backend   *s3mem.Backend
	s3        http.Handler

	mu       sync.Mutex
	requests map[string]int // by "METHOD" and "GET range"
}

// New returns a server that accepts requests signed with accessKey (any
// secret) and refuses others with 403 InvalidAccessKeyId; an empty
// accessKey accepts every request.
func New(accessKey string) *Server {
	b := s3mem.New()
	return &Server{accessKey: accessKey, backend: b, requests: make(map[string]int),
		s3: gofakes3.New(b, gofakes3.WithoutVersioning()).Server()}
}

// CreateBucket creates a bucket.
func (s *Server) CreateBucket(name string) error { return s.backend.CreateBucket(name) }

// Put stores an object.
func (s *Server) Put(bucket, key string, data []byte) error {
	meta := map[string]string{"Content-Type": "application/octet-stream",
		"Last-Modified": time.Now().UTC().Format(http.TimeFormat)}
	_, err := s.backend.PutObject(bucket, key, meta,
		bytes.NewReader(data), int64(len(data)), nil)
	return err
}

// Requests returns how many requests of a kind were served: "GET" for
// whole-object GETs, "GET range" for ranged ones, "HEAD", "LIST", "PUT".
func (s *Server) Requests(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[kind]
}

// ResetRequests zeroes the counts.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.requests)
}

// ServeHTTP checks the request's access key id and serves it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.accessKey != "" && accessKeyID(r) != s.accessKey {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidAccessKeyId</Code>`+
			`<Message>The AWS Access Key Id you provided does not exist in our records.</Message></Error>`)
		return
	}
	kind := r.Method
	switch {
	case r.Method == http.MethodGet && r.Header.Get("Range") != "":
		kind = "GET range"
	case r.Method == http.MethodGet && strings.Count(strings.Trim(r.URL.Path, "/"), "/") == 0:
		kind = "LIST"
	}
	s.mu.Lock()
	s.requests[kind]++
	s.mu.Unlock()
	s.s3.ServeHTTP(w, r)
}

// accessKeyID returns the access key id of a SigV4 or SigV2 request's
// Authorization header, or of a presigned URL.
func accessKeyID(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	if i := strings.Index(auth, "Credential="); i >= 0 {
		id, _, _ := strings.Cut(auth[i+len("Credential="):], "/")
		return id
	}
	if rest, ok := strings.CutPrefix(auth, "AWS "); ok {
		id, _, _ := strings.Cut(rest, ":")
		return id
	}
	if c := r.URL.Query().Get("X-Amz-Credential"); c != "" {
		id, _, _ := strings.Cut(c, "/")
		return id
	}
	return ""
}
