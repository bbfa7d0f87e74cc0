package cli

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/raftmaster/raftmaster/objstore"
	"github.com/raftmaster/raftmaster/recordio"
)

func indexCommand() *cli.Command {
	return &cli.Command{
		Name:      "index",
		Usage:     "write the index object of existing RecordIO files, local or in an object store",
		ArgsUsage: "FILE|PATTERN...",
		UsageText: "raftmaster recordio index [--s3-endpoint URL] [--s3-region R] [--s3-path-style auto|true|false] FILE|PATTERN...\n\n" +
			"Examples:\n" +
			"   raftmaster recordio index 'data/train-*.recordio'\n" +
			"   raftmaster recordio index 's3://bucket/train/*.recordio'",
		Description: "For each file, index reads its chunk headers and writes FILE" + recordio.IndexSuffix + " beside\n" +
			"it: the file's size (and entity tag, in an object store), and each chunk's offset\n" +
			"and record count, with a checksum. The leader then indexes the file with one\n" +
			"request instead of one per chunk; an index that is missing, damaged or does\n" +
			"not match its file is ignored. Patterns are expanded as the leader expands\n" +
			"them; s3:// and gs:// objects are read and written with the credentials\n" +
			"described in docs/object-stores.md. The index objects' names are printed.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "s3-endpoint", Usage: "S3-compatible endpoint (default: " + objstore.EnvS3Endpoint + ", AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else s3.amazonaws.com)"},
			&cli.StringFlag{Name: "s3-region", Usage: "region of s3:// requests (default: " + objstore.EnvS3Region + ", AWS_REGION, AWS_DEFAULT_REGION)"},
			&cli.StringFlag{Name: "s3-path-style", Usage: "auto, true or false (default: " + objstore.EnvS3PathStyle + ", else auto)"},
		},
		Action: runIndex,
	}
}

func runIndex(c *cli.Context) error {
	args := c.Args().Slice()
	if len(args) == 0 {
		return errors.New("index needs at least one FILE or PATTERN")
	}
	var local, remote []string
	for _, a := range args {
		if objstore.IsURL(a) {
			remote = append(remote, a)
		} else {
			local = append(local, a)
		}
	}
	var errs []error
	if len(local) > 0 {
		paths, err := recordio.Glob(local, recordio.IndexLimits{})
		if err != nil {
			return err
		}
		for _, p := range paths {
			if _, err := recordio.WriteIndexObjectFile(p); err != nil {
				errs = append(errs, err)
				continue
			}
			fmt.Fprintln(c.App.Writer, p+recordio.IndexSuffix)
		}
	}
	if len(remote) > 0 {
		st, err := objectStoreFromFlags(c)
		if err != nil {
			return err
		}
		files, err := st.Glob(c.Context, remote, recordio.IndexLimits{}, recordio.GlobLimits{})
		if err != nil {
			return err
		}
		for _, f := range files {
			if _, err := st.WriteIndexObject(c.Context, f.URL); err != nil {
				errs = append(errs, err)
				continue
			}
			fmt.Fprintln(c.App.Writer, f.URL+recordio.IndexSuffix)
		}
	}
	return errors.Join(errs...)
}

// objectStoreFromFlags returns a Store configured by the environment and
// the command's --s3-* flags.
func objectStoreFromFlags(c *cli.Context) (*objstore.Store, error) {
	cfg, err := objstore.ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	if v := c.String("s3-endpoint"); v != "" {
		cfg.S3Endpoint = v
	}
	if v := c.String("s3-region"); v != "" {
		cfg.S3Region = v
	}
	if v := c.String("s3-path-style"); v != "" {
		if cfg.S3PathStyle, err = objstore.ParsePathStyle(v); err != nil {
			return nil, fmt.Errorf("--s3-path-style: %w", err)
		}
	}
	return objstore.New(cfg), nil
}
