// Command errorsgen writes the clients' copies of the wire error codes
// from rpc.ErrorCodes, the one list of them: the Go client's re-exported
// sentinels (client/errors_gen.go) and the Python client's exception
// classes (the generated section of python/raftmaster/errors.py, which
// keeps the classes in the module that defines their base).
//
// go generate runs it from the rpc directory (the directive is in
// rpc/errors.go):
//
//	go generate ./rpc
//
// Its test fails when the committed files differ from what it writes.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", "..", "the repository's root directory")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "errorsgen:", err)
		os.Exit(1)
	}
}

// run rewrites the generated files under root that differ from what
// render gives.
func run(root string) error {
	files, err := render(root, rpcErrorCodes())
	if err != nil {
		return err
	}
	for _, f := range files {
		path := filepath.Join(root, f.path)
		old, err := os.ReadFile(path)
		if err == nil && bytes.Equal(old, f.content) {
			continue
		}
		if err := os.WriteFile(path, f.content, 0o644); err != nil {
			return err
		}
		fmt.Printf("errorsgen: wrote %s\n", f.path)
	}
	return nil
}
