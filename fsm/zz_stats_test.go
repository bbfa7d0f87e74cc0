package fsm

import (
	"fmt"
	"sort"
	"testing"

	"pgregory.net/rapid"
)

func TestZZStats(t *testing.T) {
	counts := map[string]int{}
	rapid.Check(t, func(t *rapid.T) {
		g := newPropGen()
		maxPass := 0
		for range rapid.IntRange(propMaxSteps/4, propMaxSteps).Draw(t, "steps") {
			b, r := g.step(t)
			c, err := Decode(b)
			name := "garbage"
			if err == nil {
				name = c.Type().String()
			}
			key := fmt.Sprintf("%s/%v", name, r.Code)
			if r.Ignored {
				key += "/ignored"
			}
			if r.Duplicate {
				key += "/dup"
			}
			counts[key]++
			maxPass = max(maxPass, g.f.Pass())
		}
		counts[fmt.Sprint("maxpass=", maxPass)]++
		for _, gi := range g.f.Groups() {
			counts["group/"+gi.Status]++
		}
		st := g.f.Stats()
		counts[fmt.Sprintf("final failed=%d", st.Failed)]++
	})
	var keys []string
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%-40s %d", k, counts[k])
	}
}
