package fsm

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
)

// TestCommandTable checks that every command type from 1 to the last has a
// complete row in commands: a unique name (its Go type's), a constructor
// whose command reports the row's type and round-trips through Encode and
// Decode, a validator and an apply function; and that type 0 has none.
func TestCommandTable(t *testing.T) {
	if lookup(0) != nil {
		t.Errorf("type 0 has a row; it must stay unknown, so that a zero type byte halts")
	}
	if numTypes < 2 {
		t.Fatalf("no command types")
	}
	names := map[string]CmdType{}
	for typ := CmdType(1); typ < numTypes; typ++ {
		spec := lookup(typ)
		if spec == nil {
			t.Errorf("type %d has no row", typ)
			continue
		}
		if spec.name == "" {
			t.Errorf("type %d has no name", typ)
		} else if other, dup := names[spec.name]; dup {
			t.Errorf("types %d and %d are both named %q", other, typ, spec.name)
		}
		names[spec.name] = typ
		if typ.String() != spec.name {
			t.Errorf("type %d: String() = %q, want %q", typ, typ.String(), spec.name)
		}
		if spec.validate == nil {
			t.Errorf("%s has no validator", spec.name)
		}
		if (spec.apply == nil) == (spec.applyJob == nil) || spec.jobScoped != (spec.applyJob != nil) ||
			(spec.creates && !spec.jobScoped) {
			t.Errorf("%s has no apply function, or both, or a job's flags without a job's", spec.name)
		}
		c := spec.new()
		if c == nil || c.Type() != typ {
			t.Errorf("%s: the constructor returns %T, whose type is not %d", spec.name, c, typ)
			continue
		}
		if goName := reflect.TypeOf(c).Elem().Name(); goName != spec.name {
			t.Errorf("type %d is named %q but its command is a %s", typ, spec.name, goName)
		}
		b := Encode(c)
		if d, err := Decode(b); err != nil || reflect.TypeOf(d) != reflect.TypeOf(c) || !bytes.Equal(Encode(d), b) {
			t.Errorf("%s: an empty command decodes to %#v, %v", spec.name, d, err)
		}
		if spec.validate != nil {
			_ = spec.validate(c) // takes the row's own command without panicking
		}
	}
	if got, want := numTypes.String(), fmt.Sprintf("CmdType(%d)", uint8(numTypes)); got != want {
		t.Errorf("the type past the last is named %q, want %q", got, want)
	}
}

// TestSeedCommandsCoverEveryType keeps the fuzz seeds, which the halting
// and round-trip tests reuse, complete as types are added, and applies each
// through its row, at the protocol level its type needs.
func TestSeedCommandsCoverEveryType(t *testing.T) {
	seen := map[CmdType]bool{}
	for _, c := range seedCommands() {
		seen[c.Type()] = true
		f := applyLog(setupLogAt(lookup(c.Type()).since))
		if r := f.ApplyEntry(100, Encode(c)); r.Code == CodeInvalid {
			t.Errorf("seed %v was rejected: %s", c.Type(), r.Message)
		}
	}
	for typ := CmdType(1); typ < numTypes; typ++ {
		if !seen[typ] {
			t.Errorf("seedCommands has no %v", typ)
		}
	}
}
