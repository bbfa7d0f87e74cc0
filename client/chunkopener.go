package client

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

// ChunkOpener opens the file a chunk's path names, for reading with
// seeks: the trainer reads each chunk by its offset. It is called with
// the context of the pass.
type ChunkOpener func(ctx context.Context, path string) (io.ReadSeekCloser, error)

// WithChunkOpener makes the reader open chunk paths of the URL scheme
// (e.g. "s3" for s3://bucket/key) with open; paths without a scheme are
// local files, opened with os.Open. The object-store reader is in
// package objstore, which the core client does not link:
//
//	st, err := objstore.NewFromEnv()
//	c, err := client.NewClient(client.WithAddrs(...),
//		client.WithChunkOpener("s3", st.Opener()),
//		client.WithChunkOpener("gs", st.Opener()))
func WithChunkOpener(scheme string, open ChunkOpener) Option {
	return func(c *Client) error {
		if scheme == "" || strings.ContainsAny(scheme, ":/") || open == nil {
			return fmt.Errorf("client: WithChunkOpener: want a scheme such as \"s3\" and a function, got %q", scheme)
		}
		if c.openers == nil {
			c.openers = make(map[string]ChunkOpener)
		}
		c.openers[scheme] = open
		return nil
	}
}

// openChunkFile opens the file of a chunk: with the opener of its URL
// scheme, or as a local file.
func (c *Client) openChunkFile(ctx context.Context, path string) (io.ReadSeekCloser, error) {
	if scheme, _, ok := strings.Cut(path, "://"); ok && scheme != "file" && !strings.ContainsAny(scheme, "/.") {
		open := c.openers[scheme]
		if open == nil {
			return nil, fmt.Errorf("no reader of %s:// chunks: give the client one with WithChunkOpener (package objstore reads s3:// and gs://)", scheme)
		}
		return open(ctx, path)
	}
	return os.Open(path)
}
