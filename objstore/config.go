// Package objstore reads RecordIO datasets from object stores: it lists,
// stats and range-reads s3:// objects on any S3-compatible endpoint (AWS
// S3, MinIO, Ceph RGW, ...) and gs:// objects through Google Cloud
// Storage's S3-compatible XML API with HMAC keys.
//
// The leader uses it to expand and index object-store patterns, and a
// trainer that reads object stores registers its Opener with the Go
// client (client.WithChunkOpener); the core client does not link it.
//
// # Configuration
//
// ConfigFromEnv reads, for s3:// URLs:
//
//   - RAFTMASTER_S3_ENDPOINT, else AWS_ENDPOINT_URL_S3, else
//     AWS_ENDPOINT_URL: the endpoint, as host[:port] (HTTPS) or as a URL
//     (http:// or https://). Default s3.amazonaws.com.
//   - RAFTMASTER_S3_REGION, else AWS_REGION, else AWS_DEFAULT_REGION.
//     Empty lets the client ask the bucket's region.
//   - RAFTMASTER_S3_PATH_STYLE: "true" for path-style requests
//     (http://host/bucket/key, as MinIO and most self-hosted stores
//     want), "false" for virtual-host style, "auto" (default) to let the
//     client choose by endpoint.
//   - Credentials, in this order: AWS_ACCESS_KEY_ID,
//     AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN; the shared credentials
//     file (AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/credentials) with
//     the profile AWS_PROFILE (default "default"); the instance's or
//     task's IAM role (EC2, ECS, EKS web identity), unless
//     RAFTMASTER_S3_IAM=false. With none, requests are anonymous.
//
// and for gs:// URLs:
//
//   - RAFTMASTER_GS_ENDPOINT: default https://storage.googleapis.com.
//   - GS_ACCESS_KEY_ID and GS_SECRET_ACCESS_KEY: an HMAC key of a service
//     account (Cloud Storage, Settings, Interoperability). Without them,
//     requests are anonymous (public buckets only).
//
// No secret is ever logged, and no error of this package holds one.
package objstore

import (
	"fmt"
	"net/url"
	"os"
	"strings"
)

// PathStyle says how requests name the bucket.
type PathStyle int

// Path styles.
const (
	// PathStyleAuto lets the client choose by endpoint.
	PathStyleAuto PathStyle = iota
	// PathStyleOn names the bucket in the path: http://host/bucket/key.
	PathStyleOn
	// PathStyleOff names it in the host: http://bucket.host/key.
	PathStyleOff
)

// ParsePathStyle parses "auto" (or ""), "true" or "false".
func ParsePathStyle(s string) (PathStyle, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return PathStyleAuto, nil
	case "true", "on", "path", "1":
		return PathStyleOn, nil
	case "false", "off", "virtual", "0":
		return PathStyleOff, nil
	}
	return PathStyleAuto, fmt.Errorf("objstore: path style %q: want auto, true or false", s)
}

// String returns "auto", "true" or "false".
func (p PathStyle) String() string {
	switch p {
	case PathStyleOn:
		return "true"
	case PathStyleOff:
		return "false"
	}
	return "auto"
}

// Default endpoints.
const (
	DefaultS3Endpoint = "s3.amazonaws.com"
	DefaultGSEndpoint = "https://storage.googleapis.com"
)

// Names of the environment variables ConfigFromEnv reads; credentials
// variables are read when a request is signed, not kept in Config.
const (
	EnvS3Endpoint  = "RAFTMASTER_S3_ENDPOINT"
	EnvS3Region    = "RAFTMASTER_S3_REGION"
	EnvS3PathStyle = "RAFTMASTER_S3_PATH_STYLE"
	EnvS3IAM       = "RAFTMASTER_S3_IAM"
	EnvGSEndpoint  = "RAFTMASTER_GS_ENDPOINT"
	EnvGSAccessKey = "GS_ACCESS_KEY_ID"
	EnvGSSecretKey = "GS_SECRET_ACCESS_KEY"
)

// Config says where the object stores are. It holds no secret:
// credentials are taken from the environment and the shared files when a
// request is signed.
type Config struct {
	// S3Endpoint is the endpoint of s3:// URLs: host[:port], reached
	// over HTTPS, or an http:// or https:// URL.
	S3Endpoint string
	// S3Region is the region requests are signed for; empty asks the
	// bucket's.
	S3Region string
	// S3PathStyle says how requests name the bucket.
	S3PathStyle PathStyle
	// NoIAM leaves the instance's IAM role out of the credentials chain,
	// so that no request goes to a metadata service.
	NoIAM bool
	// GSEndpoint is the endpoint of gs:// URLs.
	GSEndpoint string
}

// ConfigFromEnv returns the Config the environment describes (see the
// package documentation); unset settings take their defaults.
func ConfigFromEnv() (Config, error) {
	c := Config{
		S3Endpoint: firstEnv(EnvS3Endpoint, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
		S3Region:   firstEnv(EnvS3Region, "AWS_REGION", "AWS_DEFAULT_REGION"),
		GSEndpoint: os.Getenv(EnvGSEndpoint),
	}
	var err error
	if c.S3PathStyle, err = ParsePathStyle(os.Getenv(EnvS3PathStyle)); err != nil {
		return c, fmt.Errorf("%s: %w", EnvS3PathStyle, err)
	}
	switch strings.ToLower(os.Getenv(EnvS3IAM)) {
	case "", "true", "on", "1":
	case "false", "off", "0":
		c.NoIAM = true
	default:
		return c, fmt.Errorf("objstore: %s=%q: want true or false", EnvS3IAM, os.Getenv(EnvS3IAM))
	}
	return c, nil
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// endpoint splits an endpoint setting into the host[:port] the client
// takes and whether it is reached over TLS.
func endpoint(setting, def string) (host string, secure bool, err error) {
	if setting == "" {
		setting = def
	}
	if !strings.Contains(setting, "://") {
		return setting, true, nil
	}
	u, err := url.Parse(setting)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") || u.User != nil {
		return "", false, fmt.Errorf("objstore: endpoint %q: want host[:port], or an http:// or https:// URL without a path", redactURL(setting))
	}
	return u.Host, u.Scheme == "https", nil
}

// redactURL drops any user information from an endpoint before it is
// quoted in an error.
func redactURL(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			return s[:i+3] + "REDACTED@" + rest[at+1:]
		}
	}
	return s
}
