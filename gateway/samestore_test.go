package gateway

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
)

// TestSameStore: a reload keeps the store exactly when the new store
// section would build the same one. Every field of a Redis store section
// counts, and only store.memory counts between memory stores; the walk over
// the fields by reflection makes a field added to the section without a
// comparison here fail the test.
func TestSameStore(t *testing.T) {
	base := func() config.Store {
		return config.Store{Type: config.StoreRedis, Prefix: "p", Timeout: time.Second, OnError: config.OnErrorLocal,
			Redis:  config.Redis{Mode: config.RedisStandalone, Addrs: []string{"a:1", "b:2"}},
			Memory: config.Memory{MaxKeys: 10}}
	}
	a, b := base(), base()
	b.Redis.Addrs = []string{"a:1", "b:2"} // equal, not the same slice
	if !sameStore(&a, &b) {
		t.Fatal("sameStore of two equal Redis sections = false, want true")
	}
	// Change each field of the section, and of its redis and memory parts.
	typ := reflect.TypeFor[config.Store]()
	var leaves [][]int
	for i := range typ.NumField() {
		if f := typ.Field(i); f.Type.Kind() == reflect.Struct {
			for j := range f.Type.NumField() {
				leaves = append(leaves, []int{i, j})
			}
		} else {
			leaves = append(leaves, []int{i})
		}
	}
	for _, idx := range leaves {
		name := typ.FieldByIndex(idx[:1]).Name
		if len(idx) == 2 {
			name += "." + typ.FieldByIndex(idx).Name
		}
		t.Run(name, func(t *testing.T) {
			a, b := base(), base()
			fv := reflect.ValueOf(&b).Elem().FieldByIndex(idx)
			switch fv.Kind() {
			case reflect.String:
				fv.SetString(fv.String() + "x")
			case reflect.Int, reflect.Int64:
				fv.SetInt(fv.Int() + 1)
			case reflect.Bool:
				fv.SetBool(!fv.Bool())
			case reflect.Slice:
				fv.Set(reflect.ValueOf([]string{"c:3"}))
			case reflect.Pointer: // *bool, where nil means true (store.local_deny.enabled)
				if fv.Type().Elem().Kind() != reflect.Bool {
					t.Fatalf("field of type %s: teach this test to change it", fv.Type())
				}
				flipped := !fv.IsNil() && !fv.Elem().Bool()
				fv.Set(reflect.ValueOf(&flipped))
			default:
				t.Fatalf("field of kind %s: teach this test to change it", fv.Kind())
			}
			if sameStore(&a, &b) {
				t.Errorf("sameStore = true after changing %s, want false", name)
			}
		})
	}

	// Left out, local_deny.enabled is true.
	on := base()
	on.LocalDeny.Enabled = new(true)
	if a := base(); !sameStore(&a, &on) {
		t.Error("local_deny.enabled left out and true: sameStore = false, want true")
	}

	mem := func(max int) config.Store {
		s := base()
		s.Type, s.Memory.MaxKeys = config.StoreMemory, max
		return s
	}
	m1, m2 := mem(10), mem(10)
	m2.Prefix, m2.Redis.Addrs = "other", nil
	if !sameStore(&m1, &m2) {
		t.Error("two memory sections that differ outside store.memory: sameStore = false, want true")
	}
	if m3 := mem(11); sameStore(&m1, &m3) {
		t.Error("memory sections with different max_keys: sameStore = true, want false")
	}
	if r := base(); sameStore(&m1, &r) || sameStore(&r, &m1) {
		t.Error("a memory and a Redis section: sameStore = true, want false")
	}
}
