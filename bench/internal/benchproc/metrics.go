package benchproc

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// StoreTrouble sums sluice_store_errors_total and
// sluice_fallback_decisions_total (docs/operations.md) from the /metrics of
// the sluice admin listener at admin (host:port): non-zero means some
// decisions did not come from the configured store.
func StoreTrouble(admin string) (float64, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + admin + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("scrape metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scrape metrics: %s", resp.Status)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "sluice_store_errors_total") && !strings.HasPrefix(line, "sluice_fallback_decisions_total") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("scrape metrics: %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}
