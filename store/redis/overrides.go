package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Overrides table. The gateway's per-key policy overrides (SPEC §6) are
// shared by every instance through two keys in one hash slot:
//
//	<prefix>:{overrides}          hash: field (opaque bytes) -> value
//	<prefix>:{overrides}:version  integer, incremented by every change
//
// A change and its version bump are one script run, so a reader that sees
// version N sees every change up to N. Readers poll LoadOverrides with the
// version they hold and get the table back only when it changed.

// overrideKeys returns the hash and version keys under the store's prefix.
func (s *Store) overrideKeys() []string {
	h := s.prefix + ":{overrides}"
	return []string{h, h + ":version"}
}

var (
	// setOverrideScript sets (ARGV[1] = "s") or deletes ("d") field ARGV[2]
	// (value ARGV[3]) and returns the new version; a delete of an absent
	// field changes nothing and returns the current version negated minus one
	// (so the caller can tell).
	setOverrideScript = newScript(`
if ARGV[1] == "s" then
  redis.call("HSET", KEYS[1], ARGV[2], ARGV[3])
elseif redis.call("HDEL", KEYS[1], ARGV[2]) == 0 then
  return -1 - tonumber(redis.call("GET", KEYS[2]) or "0")
end
return redis.call("INCR", KEYS[2])
`)
	// loadOverridesScript returns {version} when the version equals ARGV[1],
	// else {version, field1, value1, ...}.
	loadOverridesScript = newScript(`
local v = tonumber(redis.call("GET", KEYS[2]) or "0")
if tostring(v) == ARGV[1] then return {v} end
local out = redis.call("HGETALL", KEYS[1])
table.insert(out, 1, v)
return out
`)
)

// SetOverride stores value under field in the shared overrides table and
// returns the table's new version. It is bounded by the store's Timeout.
func (s *Store) SetOverride(ctx context.Context, field, value string) (int64, error) {
	v, err := s.changeOverride(ctx, "s", field, value)
	if err != nil {
		return 0, err
	}
	return v, nil
}

// DeleteOverride removes field from the shared overrides table. It reports
// whether the field existed, and returns the table's version afterwards.
func (s *Store) DeleteOverride(ctx context.Context, field string) (existed bool, version int64, err error) {
	v, err := s.changeOverride(ctx, "d", field, "")
	if err != nil {
		return false, 0, err
	}
	if v < 0 {
		return false, -1 - v, nil
	}
	return true, v, nil
}

func (s *Store) changeOverride(ctx context.Context, op, field, value string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	c, err := s.client(ctx)
	if err != nil {
		return 0, err
	}
	v, err := setOverrideScript.Exec(ctx, c.c, s.overrideKeys(), []string{op, field, value}).AsInt64()
	if err != nil {
		return 0, wrap("change override", err)
	}
	return v, nil
}

// LoadOverrides reads the shared overrides table. When its version equals
// since, it returns that version, a nil table and changed false (one small
// reply, for cheap polling); otherwise the current version and the whole
// table. Version 0 is an empty table that was never written, so pass -1 to
// always get the table. It is bounded by the store's Timeout.
func (s *Store) LoadOverrides(ctx context.Context, since int64) (version int64, table map[string]string, changed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	c, err := s.client(ctx)
	if err != nil {
		return 0, nil, false, err
	}
	arr, err := loadOverridesScript.Exec(ctx, c.c, s.overrideKeys(), []string{strconv.FormatInt(since, 10)}).ToArray()
	if err != nil {
		return 0, nil, false, wrap("load overrides", err)
	}
	if len(arr) == 0 || len(arr)%2 == 0 {
		return 0, nil, false, fmt.Errorf("redis store: load overrides: %w: %d elements", errBadReply, len(arr))
	}
	version, err = arr[0].AsInt64()
	if err != nil {
		return 0, nil, false, fmt.Errorf("redis store: load overrides: %w", errors.Join(errBadReply, err))
	}
	if len(arr) == 1 && version == since {
		return version, nil, false, nil
	}
	table = make(map[string]string, len(arr)/2)
	for i := 1; i+1 < len(arr); i += 2 {
		f, err1 := arr[i].ToString()
		v, err2 := arr[i+1].ToString()
		if err := errors.Join(err1, err2); err != nil {
			return 0, nil, false, fmt.Errorf("redis store: load overrides: %w", errors.Join(errBadReply, err))
		}
		table[f] = v
	}
	return version, table, true, nil
}
