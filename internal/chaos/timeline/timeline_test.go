package timeline

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

func TestRates(t *testing.T) {
	b := int64(Bucket)
	ops := []history.Op{
		{Invoke: 0, Return: 1},
		{Invoke: 0, Return: b - 1},
		{Invoke: 0, Return: b},
		{Invoke: 0, Return: history.Never}, // unknown: not an answer
		{Invoke: 0, Return: 3*b + 5},
	}
	got := Rates(ops)
	per := 1 / Bucket.Seconds()
	want := []float64{2 * per, per, 0, per}
	if len(got) != len(want) {
		t.Fatalf("rates %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("rates %v, want %v", got, want)
		}
	}
}

// TestSaveDrawsAPicture: the output is a PNG of the requested size class
// with the answered-rate line drawn in it.
func TestSaveDrawsAPicture(t *testing.T) {
	var ops []history.Op
	for ms := int64(0); ms < 6000; ms += 5 {
		if ms > 2000 && ms < 3000 {
			continue // a gap: the fault's unavailability
		}
		ops = append(ops, history.Op{Invoke: ms * 1e6, Return: ms*1e6 + 1e6})
	}
	path := filepath.Join(t.TempDir(), "run.png")
	faults := []Span{{Label: "kill leader n1", Start: int64(2 * time.Second), End: int64(3 * time.Second)}}
	if err := Save(path, "seed 1", ops, faults); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 200 {
		t.Fatalf("picture is %v", b)
	}
	// Some pixel is the line's blue.
	found := false
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y && !found; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if b>>8 > 120 && r>>8 < 80 && g>>8 < 110 {
				found = true
				break
			}
		}
	}
	if !found {
		t.Fatal("no line drawn")
	}
	if err := Save(filepath.Join(t.TempDir(), "empty.png"), "", nil, nil); err == nil {
		t.Fatal("an empty history drew a picture")
	}
}
