package httplimit

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluice-gw/sluice/internal/testdiff"
)

// TestKeyOf: KeyOf resolves each limit's key as the decision does (the
// Verdict.Key Observe gets), and reports an empty part.
func TestKeyOf(t *testing.T) {
	f := newFixture(t, Options{Limits: []Limit{
		{Policy: perUser, Key: mustKey(t, "header:X-User-Id")},
		{Policy: hourly, Key: mustKey(t, "header:X-User-Id", "query:tenant", "route")},
	}})
	r := httptest.NewRequest(http.MethodGet, "http://sluice.test/?tenant=acme", nil)
	r.Header.Set("X-User-Id", " u1 ")
	for i := range 2 {
		got, ok := f.m.KeyOf(HTTPRequest(r), i, nil)
		if !ok {
			t.Errorf("KeyOf(limit %d) reports an empty key", i)
		}
		f.h.ServeHTTP(httptest.NewRecorder(), r)
		want := f.lastEvent(t).Verdicts[i].Key
		if diff := testdiff.Diff(want, got); diff != "" {
			t.Errorf("KeyOf(limit %d) differs from the verdict's key (-want +got):\n%s", i, diff)
		}
	}
	r = httptest.NewRequest(http.MethodGet, "http://sluice.test/", nil)
	r.Header.Set("X-User-Id", "u1")
	if got, ok := f.m.KeyOf(HTTPRequest(r), 1, nil); ok {
		t.Errorf("KeyOf(limit 1) without tenant = %q, true; want false", got)
	}
}
