// Command fakes3 serves an in-memory S3-compatible store on 127.0.0.1 for
// tests of other languages: it prints its base URL on standard output,
// then serves until standard input is closed or it is signalled.
//
//	fakes3 [-access-key ID] [-bucket NAME]...
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/raftmaster/raftmaster/internal/fakes3"
)

func main() {
	accessKey := flag.String("access-key", "", "access key id requests must be signed with (empty: any)")
	buckets := flag.String("buckets", "", "comma-separated buckets to create")
	flag.Parse()
	s := fakes3.New(*accessKey)
	for _, b := range strings.Split(*buckets, ",") {
		if b == "" {
			continue
		}
		if err := s.CreateBucket(b); err != nil {
			log.Fatalf("fakes3: bucket %q: %v", b, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatalf("fakes3: %v", err)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		done := make(chan struct{})
		go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
		select {
		case <-sig:
		case <-done:
		}
		os.Exit(0)
	}()
	log.Fatal(http.Serve(ln, s))
}
