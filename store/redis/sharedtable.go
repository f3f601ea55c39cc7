package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Shared tables. A shared table (the gateway keeps its per-key policy
// overrides in one) is shared by every instance through two keys in one
// hash slot:
//
//	<prefix>:{<name>}          hash: field (opaque bytes) -> value
//	<prefix>:{<name>}:version  integer, incremented by every change
//
// A change and its version bump are one script run, so a reader that sees
// version N sees every change up to N. Readers poll Load with the version
// they hold and get the table back only when it changed.

// SharedTable returns the shared table called name under the store's
// prefix. Its methods are safe for concurrent use, each bounded by the
// store's Timeout:
//
//   - Set stores value under field and returns the table's new version.
//   - Delete removes field; it reports whether the field existed, and
//     returns the table's version afterwards.
//   - Load reads the table. When its version equals since, it returns that
//     version, a nil table and changed false (one small reply, for cheap
//     polling); otherwise the current version and the whole table. Version
//     0 is an empty table that was never written, so pass -1 to always get
//     the table.
func (s *Store) SharedTable(name string) interface {
	Set(ctx context.Context, field, value string) (version int64, err error)
	Delete(ctx context.Context, field string) (existed bool, version int64, err error)
	Load(ctx context.Context, since int64) (version int64, table map[string]string, changed bool, err error)
} {
	h := s.prefix + ":{" + name + "}"
	return &sharedTable{s: s, keys: []string{h, h + ":version"}}
}

// sharedTable is what SharedTable returns.
type sharedTable struct {
	s    *Store
	keys []string // the hash and its version
}

var (
	// setTableScript sets (ARGV[1] = "s") or deletes ("d") field ARGV[2]
	// (value ARGV[3]) and returns the new version; a delete of an absent
	// field changes nothing and returns the current version negated minus one
	// (so the caller can tell).
	setTableScript = newScript(`
if ARGV[1] == "s" then
  redis.call("HSET", KEYS[1], ARGV[2], ARGV[3])
elseif redis.call("HDEL", KEYS[1], ARGV[2]) == 0 then
  return -1 - tonumber(redis.call("GET", KEYS[2]) or "0")
end
return redis.call("INCR", KEYS[2])
`)
	// loadTableScript returns {version} when the version equals ARGV[1],
	// else {version, field1, value1, ...}.
	loadTableScript = newScript(`
local v = tonumber(redis.call("GET", KEYS[2]) or "0")
if tostring(v) == ARGV[1] then return {v} end
local out = redis.call("HGETALL", KEYS[1])
table.insert(out, 1, v)
return out
`)
)

func (t *sharedTable) Set(ctx context.Context, field, value string) (int64, error) {
	return t.change(ctx, "s", field, value)
}

func (t *sharedTable) Delete(ctx context.Context, field string) (existed bool, version int64, err error) {
	v, err := t.change(ctx, "d", field, "")
	if err != nil {
		return false, 0, err
	}
	if v < 0 {
		return false, -1 - v, nil
	}
	return true, v, nil
}

func (t *sharedTable) change(ctx context.Context, op, field, value string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, t.s.timeout)
	defer cancel()
	c, err := t.s.client(ctx)
	if err != nil {
		return 0, err
	}
	v, err := setTableScript.Exec(ctx, c.c, t.keys, []string{op, field, value}).AsInt64()
	if err != nil {
		return 0, wrap("change shared table", err)
	}
	return v, nil
}

func (t *sharedTable) Load(ctx context.Context, since int64) (version int64, table map[string]string, changed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, t.s.timeout)
	defer cancel()
	c, err := t.s.client(ctx)
	if err != nil {
		return 0, nil, false, err
	}
	arr, err := loadTableScript.Exec(ctx, c.c, t.keys, []string{strconv.FormatInt(since, 10)}).ToArray()
	if err != nil {
		return 0, nil, false, wrap("load shared table", err)
	}
	if len(arr) == 0 || len(arr)%2 == 0 {
		return 0, nil, false, fmt.Errorf("redis store: load shared table: %w: %d elements", errBadReply, len(arr))
	}
	version, err = arr[0].AsInt64()
	if err != nil {
		return 0, nil, false, fmt.Errorf("redis store: load shared table: %w", errors.Join(errBadReply, err))
	}
	if len(arr) == 1 && version == since {
		return version, nil, false, nil
	}
	table = make(map[string]string, len(arr)/2)
	for i := 1; i+1 < len(arr); i += 2 {
		f, err1 := arr[i].ToString()
		v, err2 := arr[i+1].ToString()
		if err := errors.Join(err1, err2); err != nil {
			return 0, nil, false, fmt.Errorf("redis store: load shared table: %w", errors.Join(errBadReply, err))
		}
		table[f] = v
	}
	return version, table, true, nil
}
