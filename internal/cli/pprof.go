package cli

import (
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/hashicorp/go-hclog"
)

// servePprof serves Go's runtime profiles (net/http/pprof) on addr, apart
// from the API, until the process exits. It returns once the address is
// bound, so that a bad address fails the start.
func servePprof(addr string, logger hclog.Logger) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("serving profiles", "addr", "http://"+l.Addr().String()+"/debug/pprof/")
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("profile server stopped", "error", err)
		}
	}()
	return nil
}
