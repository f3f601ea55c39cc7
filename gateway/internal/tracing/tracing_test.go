package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// receiver is an in-process OTLP/HTTP trace receiver: it decodes each
// export request and keeps the path it was posted to and the spans.
type receiver struct {
	mu    sync.Mutex
	paths []string
	spans map[string]map[string]any // span name -> attribute key -> value
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.paths = append(rc.paths, r.URL.Path)
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				a := map[string]any{}
				for _, kv := range s.Attributes {
					a[kv.Key] = kv.Value.String()
				}
				for _, kv := range rs.Resource.GetAttributes() {
					a["resource."+kv.Key] = kv.Value.GetStringValue()
				}
				rc.spans[s.Name] = a
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Write(out)
}

// TestOTLPExport sends spans through the real OTLP/HTTP exporter to an
// in-process receiver: a URL without a path posts to /v1/traces, one with
// a path posts there, and Shutdown flushes the batch.
func TestOTLPExport(t *testing.T) {
	for _, c := range []struct{ path, want string }{{"", "/v1/traces"}, {"/otlp/v1/traces", "/otlp/v1/traces"}} {
		rc := &receiver{spans: map[string]map[string]any{}}
		srv := httptest.NewServer(rc)
		tr, err := New(Options{Endpoint: srv.URL + c.path, Sample: 1, Version: "v9.9.9"})
		if err != nil {
			t.Fatal(err)
		}
		s := tr.Start("GET", "/api/items", func(string) string { return "" }, time.Now())
		s.Route("api", "/api/**", "GET")
		s.Limit("per-user", "allowed", 4)
		s.End(200)
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		rc.mu.Lock()
		a, ok := rc.spans["GET /api/**"]
		if len(rc.paths) == 0 || rc.paths[0] != c.want || !ok {
			t.Errorf("endpoint path %q: posts to %v with spans %v, want a post to %s with span \"GET /api/**\"", c.path, rc.paths, rc.spans, c.want)
		} else if a["resource.service.name"] != "sluice" || a["resource.service.version"] != "v9.9.9" || a["sluice.route"] == nil {
			t.Errorf("span attributes %v: want service sluice v9.9.9 and sluice.route", a)
		}
		rc.mu.Unlock()
	}
}

func TestNewRejectsBadEndpoint(t *testing.T) {
	for _, e := range []string{"", "collector:4318", "ftp://collector"} {
		if _, err := New(Options{Endpoint: e}); err == nil {
			t.Errorf("New(%q): no error", e)
		}
	}
}
