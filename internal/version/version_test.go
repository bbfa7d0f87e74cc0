package version

import "testing"

func TestString(t *testing.T) {
	defer func(s string) { stamp = s }(stamp)
	stamp = "v1.2.3-4-gabcdef"
	if got := String(); got != stamp {
		t.Fatalf("String() = %q, want the stamp %q", got, stamp)
	}
	stamp = ""
	if got := String(); got == "" {
		t.Fatal("String() is empty without a stamp; want the build info's version or \"unknown\"")
	}
}
