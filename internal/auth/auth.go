// Package auth holds the API's bearer tokens, their roles and the jobs
// each covers, read from a file of "ROLE TOKEN [JOBS]" lines and reloaded
// on demand (SIGHUP).
package auth

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
)

// Role is what a token may do.
type Role string

// The roles, from least to most allowed.
const (
	// Trainer may use tasks, datasets, save-model, allgather, the
	// register and status, on the jobs its token covers.
	Trainer Role = "trainer"
	// Operator may do everything, cluster changes, backups, debug
	// endpoints and job creation and deletion included, on every job.
	Operator Role = "operator"
)

// Allows reports whether r may do what needs role need.
func (r Role) Allows(need Role) bool {
	return r == Operator || r == need
}

// minTokenLen is the shortest token accepted: 16 characters of a random
// token make guessing hopeless.
const minTokenLen = 16

// Grant is what one token allows: its role and the jobs it covers.
type Grant struct {
	// Role is the token's role.
	Role Role
	// Jobs are the job names and path.Match patterns the token covers;
	// nil covers every job.
	Jobs []string
	// Owner identifies the token without revealing it: a hash of the
	// token, which the cluster stores with the client identities the
	// token creates, and which keys the token's quotas.
	Owner [16]byte
}

// Covers reports whether the grant may act on job.
func (g Grant) Covers(job string) bool {
	if g.Jobs == nil {
		return true
	}
	for _, p := range g.Jobs {
		if ok, _ := path.Match(p, job); ok {
			return true
		}
	}
	return false
}

// Scoped reports whether the grant covers only some jobs.
func (g Grant) Scoped() bool { return g.Jobs != nil }

// OwnerOf returns the owner hash of token (Grant.Owner): the first 16
// bytes of a SHA-256 of the token under a fixed label. Tokens are random
// and at least 16 characters, so the hash cannot be turned back into one.
func OwnerOf(token string) [16]byte {
	h := sha256.New()
	h.Write([]byte("raftmaster token owner\x00"))
	h.Write([]byte(token))
	var o [16]byte
	copy(o[:], h.Sum(nil))
	return o
}

type entry struct {
	token []byte
	grant Grant
}

// Tokens is the set of valid tokens. It is safe for concurrent use.
type Tokens struct {
	path string
	mu   sync.RWMutex
	list []entry
}

// Load reads the token file at path.
func Load(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// ErrReadable means the token file may be read by users other than the
// server's.
var ErrReadable = errors.New("the token file may be read by other users")

// CheckMode refuses a file that others may read, or that its group may
// read or write, unless the group is root's or the server's own (as a
// Kubernetes secret volume with fsGroup gives): mode 0600 or 0400 always
// pass, 0640 or 0440 only with such a group.
func CheckMode(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	mode := fi.Mode().Perm()
	bad := mode&0o077 != 0
	if bad && mode&0o037 == 0 {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (st.Gid == 0 || int(st.Gid) == os.Getgid()) {
			bad = false
		}
	}
	if bad {
		return fmt.Errorf("%w: %s has mode %04o; run chmod 600 %s (group read is allowed only for root's or the server's own group)", ErrReadable, p, mode, p)
	}
	return nil
}

// Reload reads the file again. On an error the tokens in use stay.
func (t *Tokens) Reload() error {
	if err := CheckMode(t.path); err != nil {
		return fmt.Errorf("auth tokens: %w", err)
	}
	f, err := os.Open(t.path)
	if err != nil {
		return fmt.Errorf("auth tokens: %w", err)
	}
	defer f.Close()
	var list []entry
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 && len(fields) != 3 {
			return fmt.Errorf("auth tokens %s line %d: want ROLE TOKEN [JOBS]", t.path, n)
		}
		role := Role(fields[0])
		if role != Trainer && role != Operator {
			return fmt.Errorf("auth tokens %s line %d: role %q: want %s or %s", t.path, n, role, Trainer, Operator)
		}
		if len(fields[1]) < minTokenLen {
			return fmt.Errorf("auth tokens %s line %d: a token of %d characters; use at least %d", t.path, n, len(fields[1]), minTokenLen)
		}
		if seen[fields[1]] {
			return fmt.Errorf("auth tokens %s line %d: a token given twice", t.path, n)
		}
		seen[fields[1]] = true
		g := Grant{Role: role, Owner: OwnerOf(fields[1])}
		if len(fields) == 3 {
			if role == Operator {
				return fmt.Errorf("auth tokens %s line %d: an operator token covers every job; give JOBS to trainer tokens only", t.path, n)
			}
			jobs, err := parseJobs(fields[2])
			if err != nil {
				return fmt.Errorf("auth tokens %s line %d: %v", t.path, n, err)
			}
			g.Jobs = jobs
		}
		list = append(list, entry{token: []byte(fields[1]), grant: g})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("auth tokens %s: %w", t.path, err)
	}
	if len(list) == 0 {
		return fmt.Errorf("auth tokens %s: no tokens", t.path)
	}
	t.mu.Lock()
	t.list = list
	t.mu.Unlock()
	return nil
}

// parseJobs reads a comma-separated list of job names and path.Match
// patterns.
func parseJobs(s string) ([]string, error) {
	var jobs []string
	for _, p := range strings.Split(s, ",") {
		if p == "" {
			return nil, fmt.Errorf("jobs %q: an empty job name", s)
		}
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("jobs %q: pattern %q: %v", s, p, err)
		}
		jobs = append(jobs, p)
	}
	return jobs, nil
}

// Lookup returns the grant of token, comparing it with every known token
// in constant time, and false when it is unknown.
func (t *Tokens) Lookup(token string) (Grant, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var g Grant
	found := 0
	for _, e := range t.list {
		if subtle.ConstantTimeCompare(e.token, []byte(token)) == 1 {
			g = e.grant
			found = 1
		}
	}
	return g, found == 1
}

// Role returns the role of token, and false when it is unknown.
func (t *Tokens) Role(token string) (Role, bool) {
	g, ok := t.Lookup(token)
	return g.Role, ok
}

// Operator returns an operator token of the file, which a node presents
// to the others, and "" when the file has none.
func (t *Tokens) Operator() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, e := range t.list {
		if e.grant.Role == Operator {
			return string(e.token)
		}
	}
	return ""
}
