package etcdmaster

import (
	"bytes"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
)

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func nopCloser(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }
