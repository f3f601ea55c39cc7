package redis

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// fuzzPolicies holds one policy per algorithm, so every key layout is built.
var fuzzPolicies = []*ratelimit.Policy{
	ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 1}),
	ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: 5, Rate: 1}),
	ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 5, Window: time.Second}),
	ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Second}),
	ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingWindow, Limit: 5, Window: time.Second}),
	ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.GCRA, Burst: 5, Rate: 1}),
}

// FuzzKeys checks the key layout for any request key and any prefix New
// accepts: every key the store builds for a script run (evaluate, peek and
// refund) is <prefix>:{<22 base64url chars>}:<suffix> with exactly one brace
// of each kind, the slot Redis Cluster derives from the whole key equals the
// store's own slot of the tag (which groups limits by slot), and nearby
// request keys get different tags. Needs no Redis; the seed corpus in
// testdata/fuzz/FuzzKeys is replayed by every go test.
func FuzzKeys(f *testing.F) {
	// The check value of CRC16/XMODEM, which the Redis Cluster
	// specification quotes for "123456789".
	if got := crc16Bitwise("123456789"); got != 0x31C3 {
		f.Fatalf("crc16Bitwise(%q) = %#x, want 0x31c3", "123456789", got)
	}
	f.Fuzz(func(t *testing.T, key []byte, prefix string) {
		s, err := newStore(Options{Prefix: prefix})
		if err != nil {
			if !strings.ContainsAny(prefix, "{}") {
				t.Fatalf("newStore(Prefix: %q) = %v, want no error", prefix, err)
			}
			return
		}
		k := string(key)
		tg := tag(k)
		checkTag(t, k, tg)

		reqs := make([]ratelimit.Request, len(fuzzPolicies))
		idx := make([]int, len(reqs))
		reps := make([]limitReply, len(reqs))
		for i, p := range fuzzPolicies {
			reqs[i] = ratelimit.Request{Key: k, Policy: p, Cost: 1}
			idx[i] = i
			reps[i].consumed = true
		}
		cl := s.newCall(modeEvaluate, "", reqs, nil)
		checkKeys(t, "evaluate", s.prefix, k, tg, cl.keys)
		checkKeys(t, "peek", s.prefix, k, tg, s.newCall(modePeek, "", reqs, idx).keys)
		rc, ok := s.refundCall(reqs, call{idx: idx, keys: cl.keys}, reps)
		if !ok {
			t.Fatalf("refundCall for %q built no run", k)
		}
		checkKeys(t, "refund", s.prefix, k, tg, rc.keys)
		if g := slotGroups(reqs); len(g) != 1 || len(g[0]) != len(reqs) {
			t.Fatalf("slotGroups(%d limits of %q) = %v, want one group", len(reqs), k, g)
		}

		// Distinct request keys never share a tag (a collision would be a
		// 128-bit SHA-256 prefix collision). Spot-check close neighbours.
		for _, other := range neighbours(k) {
			if ot := tag(other); ot == tg {
				t.Fatalf("tag(%q) = tag(%q) = %q", k, other, tg)
			}
		}
		if tag(k) != tg {
			t.Fatalf("tag(%q) is not deterministic", k)
		}
	})
}

// checkTag checks that tg is 22 base64url characters.
func checkTag(t *testing.T, key, tg string) {
	t.Helper()
	if len(tg) != tagLen {
		t.Fatalf("tag(%q) = %q: %d characters, want %d", key, tg, len(tg), tagLen)
	}
	for i := 0; i < len(tg); i++ {
		if c := tg[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			t.Fatalf("tag(%q) = %q: byte %d is %q, not base64url", key, tg, i, c)
		}
	}
}

// checkKeys checks the keys of one script run, built for fuzzPolicies (in
// order) with request key key.
func checkKeys(t *testing.T, what, prefix, key, tg string, keys []string) {
	t.Helper()
	var want []string
	for _, p := range fuzzPolicies {
		want = append(want, specOf(p).suffixes...)
	}
	if len(keys) != len(want) {
		t.Fatalf("%s keys for %q = %q, want %d keys", what, key, keys, len(want))
	}
	for i, rk := range keys {
		if n, m := strings.Count(rk, "{"), strings.Count(rk, "}"); n != 1 || m != 1 {
			t.Fatalf("%s key %q for %q has %d '{' and %d '}', want one each", what, rk, key, n, m)
		}
		if exp := prefix + ":{" + tg + "}:" + want[i]; rk != exp {
			t.Fatalf("%s key %d for %q = %q, want %q", what, i, key, rk, exp)
		}
		if got, ws := clusterKeySlot(rk), slot(tg); got != ws {
			t.Fatalf("%s key %q for %q: Redis Cluster slot %d, slot(tag) = %d", what, rk, key, got, ws)
		}
	}
}

// neighbours returns request keys that differ from key by one byte.
func neighbours(key string) []string {
	out := []string{key + "x", key + "\x00", "x" + key}
	if key != "" {
		b := []byte(key)
		b[len(b)-1] ^= 1
		out = append(out, string(b), key[:len(key)-1])
	}
	return out
}

// clusterKeySlot is Redis Cluster's keyHashSlot, written independently of
// the store's slot: CRC16 of the text between the first '{' and the next
// '}' if that is not empty, else of the whole key, modulo 16384.
func clusterKeySlot(key string) uint16 {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	return crc16Bitwise(key) & 16383
}

// crc16Bitwise is CRC16/XMODEM (polynomial 0x1021, initial 0) one bit at a
// time, to check the store's table-driven version.
func crc16Bitwise(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
