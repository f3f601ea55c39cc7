package testdiff

import "testing"

func TestDiff(t *testing.T) {
	type pair struct {
		A string
		B []int
	}
	for _, tt := range []struct {
		name      string
		want, got any
		diff      string
	}{
		{"equal structs", pair{"a", []int{1}}, pair{"a", []int{1}}, ""},
		{"equal maps", map[string]int{"x": 1, "y": 2}, map[string]int{"y": 2, "x": 1}, ""},
		{"different slices", []int{1, 2}, []int{1, 3}, "-[]int{1, 2}\n+[]int{1, 3}"},
		{"nil and empty", []string(nil), []string{}, "-[]string(nil)\n+[]string{}"},
		{"maps in key order", map[string]int{"b": 2, "a": 1}, map[string]int{"a": 1}, "-map[string]int{\"a\":1, \"b\":2}\n+map[string]int{\"a\":1}"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Diff(tt.want, tt.got); got != tt.diff {
				t.Errorf("Diff = %q, want %q", got, tt.diff)
			}
			if Equal(tt.want, tt.got) != (tt.diff == "") {
				t.Errorf("Equal = %v, want %v", !(tt.diff == ""), tt.diff == "")
			}
		})
	}
}
