// Package auth holds the API's bearer tokens and their roles, read from a
// file of "ROLE TOKEN" lines and reloaded on demand (SIGHUP).
package auth

import (
	"bufio"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"
	"sync"
)

// Role is what a token may do.
type Role string

// The roles, from least to most allowed.
const (
	// Trainer may use tasks, datasets, save-model, allgather and status.
	Trainer Role = "trainer"
	// Operator may do everything, cluster changes, backups, debug
	// endpoints and job deletion included.
	Operator Role = "operator"
)

// Allows reports whether r may do what needs role need.
func (r Role) Allows(need Role) bool {
	return r == Operator || r == need
}

// minTokenLen is the shortest token accepted: 16 characters of a random
// token make guessing hopeless.
const minTokenLen = 16

type entry struct {
	token []byte
	role  Role
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

// Reload reads the file again. On an error the tokens in use stay.
func (t *Tokens) Reload() error {
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
		if len(fields) != 2 {
			return fmt.Errorf("auth tokens %s line %d: want ROLE TOKEN", t.path, n)
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
		list = append(list, entry{token: []byte(fields[1]), role: role})
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

// Role returns the role of token, comparing it with every known token in
// constant time, and false when it is unknown.
func (t *Tokens) Role(token string) (Role, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var role Role
	found := 0
	for _, e := range t.list {
		if subtle.ConstantTimeCompare(e.token, []byte(token)) == 1 {
			role = e.role
			found = 1
		}
	}
	return role, found == 1
}

// Operator returns an operator token of the file, which a node presents
// to the others, and "" when the file has none.
func (t *Tokens) Operator() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, e := range t.list {
		if e.role == Operator {
			return string(e.token)
		}
	}
	return ""
}
