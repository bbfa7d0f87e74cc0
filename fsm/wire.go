package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// errShort is returned by the decoder when the input ends early.
var errShort = errors.New("unexpected end of data")

// encoder appends the compact binary forms used by commands and snapshots:
// unsigned and signed varints, and length-prefixed byte strings.
type encoder struct{ buf []byte }

func (e *encoder) byte(b byte)      { e.buf = append(e.buf, b) }
func (e *encoder) uvarint(v uint64) { e.buf = binary.AppendUvarint(e.buf, v) }
func (e *encoder) varint(v int64)   { e.buf = binary.AppendVarint(e.buf, v) }
func (e *encoder) bytes(b []byte)   { e.uvarint(uint64(len(b))); e.buf = append(e.buf, b...) }
func (e *encoder) string(s string)  { e.uvarint(uint64(len(s))); e.buf = append(e.buf, s...) }
func (e *encoder) raw(b []byte)     { e.buf = append(e.buf, b...) }
func (e *encoder) bool(b bool)      { e.byte(boolByte(b)) }
func (e *encoder) uuid(id [16]byte) { e.buf = append(e.buf, id[:]...) }
func (e *encoder) reset()           { e.buf = e.buf[:0] }
func (e *encoder) len() int         { return len(e.buf) }
func (e *encoder) int(v int)        { e.varint(int64(v)) }
func (e *encoder) uint32(v uint32)  { e.uvarint(uint64(v)) }
func (e *encoder) strings(s []string) {
	e.uvarint(uint64(len(s)))
	for _, x := range s {
		e.string(x)
	}
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// decoder reads what encoder wrote. The first error sticks: later reads
// return zero values, so callers check err once at the end. Every length is
// checked against the bytes that remain before anything is allocated, so a
// hostile length cannot make the decoder allocate more than its input.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.buf) < 1 {
		d.fail(errShort)
		return 0
	}
	b := d.buf[0]
	d.buf = d.buf[1:]
	return b
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

// int reads a varint that must fit an int32-sized range, which is all that
// any count or small integer in this package needs.
func (d *decoder) int() int {
	v := d.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail(fmt.Errorf("integer %d out of range", v))
		return 0
	}
	return int(v)
}

// epoch reads a task epoch written by encoder.int: an int, which may carry
// an era above 32 bits (era.go); validation checks its range.
func (d *decoder) epoch() int {
	v := d.varint()
	if v < math.MinInt32 || v > MaxEpoch {
		d.fail(fmt.Errorf("task epoch %d out of range", v))
		return 0
	}
	return int(v)
}

func (d *decoder) uint32() uint32 {
	v := d.uvarint()
	if v > math.MaxUint32 {
		d.fail(fmt.Errorf("integer %d out of range", v))
		return 0
	}
	return uint32(v)
}

func (d *decoder) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail(errors.New("invalid boolean"))
		return false
	}
}

// length reads a length prefix and checks that at least min*length bytes
// remain, so a hostile length never drives an allocation.
func (d *decoder) length(min int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if min < 1 {
		min = 1
	}
	if n > uint64(len(d.buf)/min) {
		d.fail(fmt.Errorf("length %d exceeds the remaining %d bytes", n, len(d.buf)))
		return 0
	}
	return int(n)
}

func (d *decoder) bytes() []byte {
	n := d.length(1)
	if d.err != nil {
		return nil
	}
	b := make([]byte, n)
	copy(b, d.buf[:n])
	d.buf = d.buf[n:]
	return b
}

func (d *decoder) string() string {
	n := d.length(1)
	if d.err != nil {
		return ""
	}
	s := string(d.buf[:n])
	d.buf = d.buf[n:]
	return s
}

func (d *decoder) strings() []string {
	n := d.length(1)
	if d.err != nil || n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.string()
	}
	return out
}

func (d *decoder) uuid() (id [16]byte) {
	if d.err != nil {
		return id
	}
	if len(d.buf) < 16 {
		d.fail(errShort)
		return id
	}
	copy(id[:], d.buf[:16])
	d.buf = d.buf[16:]
	return id
}

// empty reports whether the input is used up, for an optional field that
// older encodings end before.
func (d *decoder) empty() bool { return d.err == nil && len(d.buf) == 0 }

// done reports an error if input remains: every encoding is exact.
func (d *decoder) done() error {
	if d.err == nil && len(d.buf) != 0 {
		d.fail(fmt.Errorf("%d trailing bytes", len(d.buf)))
	}
	return d.err
}
