package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseRate parses a rate in units per second. It accepts a plain decimal
// ("10", "0.5") or "N/PERIOD", where N is a decimal and PERIOD a Go duration
// ("100/1m", "1/1h30m") or a bare unit meaning one of it ("5/s", "300/m",
// "1000/h"). "100/1m" is 1.666… per second. The result is finite and
// positive; range checks (ratelimit.MinRate..MaxRate) are left to the caller.
func ParseRate(s string) (float64, error) {
	num, per, hasPer := strings.Cut(s, "/")
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) || strings.ContainsAny(num, "xXpP_") {
		return 0, fmt.Errorf("rate %q: %q is not a decimal number (write e.g. 10, 0.5 or 100/1m)", s, num)
	}
	if n <= 0 {
		return 0, fmt.Errorf("rate %q must be positive", s)
	}
	if !hasPer {
		return n, nil
	}
	if per != "" && (per[0] < '0' || per[0] > '9') && per[0] != '.' {
		per = "1" + per // "5/s" means 5 per 1s
	}
	d, err := time.ParseDuration(per)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("rate %q: period %q is not a positive duration (write e.g. 100/1m, 5/s or 1000/h)", s, per)
	}
	r := n / d.Seconds()
	if math.IsInf(r, 0) || r <= 0 {
		return 0, fmt.Errorf("rate %q is out of range", s)
	}
	return r, nil
}
