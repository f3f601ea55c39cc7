package benchproc

import (
	"os"
	"strings"
)

// LoadAvg returns the 1, 5 and 15 minute load averages from /proc/loadavg,
// such as "0.52 0.61 0.70", or "n/a".
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}
