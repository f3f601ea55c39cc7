package benchproc

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseInts parses a flag's comma-separated list of positive integers
// (such as -conc 1,16,64); flagName names the flag in the error.
func ParseInts(flagName, s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: want positive integers, got %q", flagName, f)
		}
		out = append(out, n)
	}
	return out, nil
}
