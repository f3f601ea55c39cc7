package benchproc

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestTableRows(t *testing.T) {
	md := "# title\n\ntext\n\n| cell | req/s | note |\n|---|---:|---|\n| a | 10 | x |\n| b | 20 |\n\n| other | table |\n|---|---|\n| c | 1 |\n"
	rows := TableRows(md)
	if len(rows) != 2 {
		t.Fatalf("TableRows = %v, want the first table's two rows", rows)
	}
	if rows["a"]["req/s"] != "10" || rows["a"]["note"] != "x" || rows["b"]["req/s"] != "20" {
		t.Errorf("TableRows = %v", rows)
	}
	if _, ok := rows["b"]["note"]; ok {
		t.Errorf("row b has a note it does not have: %v", rows["b"])
	}
	if len(TableRows("no table\n")) != 0 {
		t.Error("TableRows found rows in text without a table")
	}
}

func TestStoreTrouble(t *testing.T) {
	var metrics atomic.Value // string: what /metrics answers
	metrics.Store(strings.Join([]string{
		"# HELP sluice_store_errors_total Failed store calls.",
		`sluice_store_errors_total{kind="timeout"} 2`,
		`sluice_store_errors_total{kind="connection"} 1`,
		`sluice_fallback_decisions_total{route="api",mode="local"} 4`,
		`sluice_requests_total{route="api"} 1000`,
	}, "\n") + "\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, metrics.Load())
	}))
	defer srv.Close()
	admin := strings.TrimPrefix(srv.URL, "http://")
	n, err := StoreTrouble(admin)
	if err != nil || n != 7 {
		t.Errorf("StoreTrouble = %v, %v; want 7, nil", n, err)
	}
	metrics.Store("sluice_store_errors_total{kind=\"other\"} x\n")
	if _, err := StoreTrouble(admin); err == nil {
		t.Error("StoreTrouble accepted a value that is not a number")
	}
	srv.Close()
	if _, err := StoreTrouble(admin); err == nil {
		t.Error("StoreTrouble reported no error with the server gone")
	}
}
