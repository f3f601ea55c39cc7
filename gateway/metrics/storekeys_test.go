package metrics

import (
	"net/http/httptest"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// scrape returns the samples of reg whose name matches name, as lines.
func scrape(t *testing.T, reg prometheus.Gatherer, name string) []string {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return regexp.MustCompile(`(?m)^`+name+`\{.*$`).FindAllString(rec.Body.String(), -1)
}

// TestStoreKeys checks sluice_store_keys across a reload: the store opened
// last of a name is reported, the earlier one again once the later closes
// (a reload whose build failed), and nothing once both are closed; and that
// sluice_store_key_overflow_total starts at zero and adds up.
func TestStoreKeys(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m1, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	if got := scrape(t, reg, "sluice_store_keys"); len(got) != 0 {
		t.Errorf("before any store: %q, want no samples", got)
	}
	stopOld := m1.WatchStoreKeys("memory", func() int { return 3 })
	m2, err := New(reg) // the reloaded gateway's
	if err != nil {
		t.Fatal(err)
	}
	stopNew := m2.WatchStoreKeys("memory", func() int { return 5 })
	stopFallback := m2.WatchStoreKeys("fallback", func() int { return 7 })
	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"both open", func() {}, []string{`sluice_store_keys{store="fallback"} 7`, `sluice_store_keys{store="memory"} 5`}},
		{"new memory store closed", stopNew, []string{`sluice_store_keys{store="fallback"} 7`, `sluice_store_keys{store="memory"} 3`}},
		{"closed twice", stopNew, []string{`sluice_store_keys{store="fallback"} 7`, `sluice_store_keys{store="memory"} 3`}},
		{"old memory store closed", stopOld, []string{`sluice_store_keys{store="fallback"} 7`}},
		{"all closed", stopFallback, nil},
	}
	for _, st := range steps {
		st.do()
		if got := scrape(t, reg, "sluice_store_keys"); !slices.Equal(got, st.want) {
			t.Errorf("%s: %q, want %q", st.name, got, st.want)
		}
	}
	if got, want := scrape(t, reg, "sluice_store_key_overflow_total"),
		[]string{`sluice_store_key_overflow_total{store="fallback"} 0`, `sluice_store_key_overflow_total{store="memory"} 0`}; !slices.Equal(got, want) {
		t.Errorf("overflow before any: %q, want %q", got, want)
	}
	m1.StoreKeyOverflow("memory", 2)
	m2.StoreKeyOverflow("memory", 1)
	if got, want := scrape(t, reg, `sluice_store_key_overflow_total`),
		[]string{`sluice_store_key_overflow_total{store="fallback"} 0`, `sluice_store_key_overflow_total{store="memory"} 3`}; !slices.Equal(got, want) {
		t.Errorf("overflow after 2+1: %q, want %q", got, want)
	}
	var nilM *Metrics
	nilM.WatchStoreKeys("memory", func() int { return 1 })()
	nilM.StoreKeyOverflow("memory", 1)
}
