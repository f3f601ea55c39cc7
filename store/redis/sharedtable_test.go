package redis

import (
	"context"
	"testing"

	"github.com/sluice-gw/sluice/internal/testdiff"
)

func TestSharedTable(t *testing.T) {
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			a := newTestStore(t, d.client(t), nil)
			// A second store on the same prefix stands for another instance.
			b, err := NewFromClient(d.client(t), Options{Prefix: a.prefix, Timeout: a.timeout})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()

			v, table, changed, err := b.SharedTable("overrides").Load(ctx, -1)
			if err != nil || v != 0 || len(table) != 0 || !changed {
				t.Fatalf("LoadOverrides(-1) on a fresh prefix = %d, %v, %v, %v; want 0, empty, true, nil", v, table, changed, err)
			}
			// Fields are opaque bytes: braces and NULs included.
			f1, f2 := "3:api2:u1", "3:api1:{\x00}"
			v1, err := a.SharedTable("overrides").Set(ctx, f1, "vip")
			if err != nil || v1 != 1 {
				t.Fatalf("SetOverride = %d, %v; want 1, nil", v1, err)
			}
			if _, err := a.SharedTable("overrides").Set(ctx, f2, "hourly"); err != nil {
				t.Fatal(err)
			}
			v, table, changed, err = b.SharedTable("overrides").Load(ctx, 0)
			if err != nil || v != 2 || !changed {
				t.Fatalf("LoadOverrides(0) = %d, changed %v, %v; want 2, true, nil", v, changed, err)
			}
			if diff := testdiff.Diff(map[string]string{f1: "vip", f2: "hourly"}, table); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
			// Polling with the current version returns nothing new.
			if v, table, changed, err = b.SharedTable("overrides").Load(ctx, 2); err != nil || v != 2 || changed || table != nil {
				t.Errorf("LoadOverrides(2) = %d, %v, %v, %v; want 2, nil, false, nil", v, table, changed, err)
			}
			existed, v, err := b.SharedTable("overrides").Delete(ctx, f1)
			if err != nil || !existed || v != 3 {
				t.Errorf("DeleteOverride(f1) = %v, %d, %v; want true, 3, nil", existed, v, err)
			}
			existed, v, err = b.SharedTable("overrides").Delete(ctx, f1)
			if err != nil || existed || v != 3 {
				t.Errorf("DeleteOverride(f1) again = %v, %d, %v; want false, 3, nil", existed, v, err)
			}
			_, table, _, err = a.SharedTable("overrides").Load(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			if diff := testdiff.Diff(map[string]string{f2: "hourly"}, table); diff != "" {
				t.Errorf("table after delete (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSharedTableStoreDown(t *testing.T) {
	s, err := New(Options{Addrs: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.SharedTable("overrides").Set(ctx, "f", "v"); ErrorKind(err) != "connection" {
		t.Errorf("SetOverride with Redis down: %v (kind %q), want a connection error", err, ErrorKind(err))
	}
	if _, _, _, err := s.SharedTable("overrides").Load(ctx, -1); err == nil {
		t.Error("LoadOverrides with Redis down succeeded")
	}
}

// TestSharedTableKeys: a table's keys are <prefix>:{<name>} and its
// version key, in one hash slot; the gateway's overrides live under
// <prefix>:{overrides} across versions of sluice.
func TestSharedTableKeys(t *testing.T) {
	s, err := New(Options{Addrs: []string{"127.0.0.1:1"}, Prefix: "p"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := s.SharedTable("overrides").(*sharedTable).keys
	if diff := testdiff.Diff([]string{"p:{overrides}", "p:{overrides}:version"}, got); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
}
