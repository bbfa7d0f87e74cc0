// Command openapigen writes rpc/openapi.json, the wire contract written
// down for other languages, from rpc.Endpoints, rpc.ErrorCodes and the Go
// types of package rpc. go generate runs it from the rpc directory (the
// directive is in rpc/doc.go):
//
//	go generate ./rpc
//
// Its test fails when the committed document differs from what it
// writes.
//
// The schemas come from the types by reflection (field names and
// omitempty/omitzero from the json tags). The descriptions are the Go doc
// comments: the package's source is parsed with go/parser and go/doc, and
// each type's, field's, code's and sentinel's comment becomes the
// description of its schema, property or enum value. So the document says
// what the Go reader reads, and a changed comment is a changed document.
// The few things no comment says are in this program: the top-level
// description, the enums of string fields and the meaning of the codes
// that have no comment.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	dir := flag.String("dir", ".", "the directory of package rpc, whose doc comments become descriptions")
	out := flag.String("o", "openapi.json", "the document to write")
	flag.Parse()
	if err := run(*dir, *out); err != nil {
		fmt.Fprintln(os.Stderr, "openapigen:", err)
		os.Exit(1)
	}
}

// run writes the document to out, unless it already holds it.
func run(dir, out string) error {
	doc, err := generate(dir)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(out); err == nil && bytes.Equal(old, doc) {
		return nil
	}
	if err := os.WriteFile(out, doc, 0o644); err != nil {
		return err
	}
	fmt.Printf("openapigen: wrote %s (%d bytes)\n", filepath.Clean(out), len(doc))
	return nil
}
