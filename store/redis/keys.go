package redis

import (
	"crypto/sha256"
	"encoding/base64"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Key layout. A limit's state lives under
//
//	<prefix>:{<tag>}:<alg>[:<suffix>]
//
// where tag is the first 16 bytes of SHA-256(Request.Key) in unpadded
// base64url (22 characters). The tag is always a hash, so whatever bytes a
// key value holds, its Redis key has a fixed length, contains no brace
// (base64url has none), cannot escape the prefix, and collides with another
// value's only by a 128-bit hash collision. Redis Cluster hashes only the
// part between the first { and the next }, the tag: all keys of one limit
// share one slot, and distinct values spread evenly over the 16384 slots.
// The prefix may not contain braces (New checks it), or it would decide the
// slot itself.

// tagBytes is how many bytes of the SHA-256 a tag keeps; tagLen is the
// length of a tag: 16 bytes in unpadded base64.
const (
	tagBytes = 16
	tagLen   = 22
)

// spec describes how one algorithm is laid out in Redis: its code in the
// script's arguments and the suffixes of its keys.
type spec struct {
	code     string
	suffixes []string
}

// specs is indexed by algCode-1.
var specs = [...]spec{
	{"1", []string{"tb"}},
	{"2", []string{"lb"}},
	{"3", []string{"fw"}},
	{"4", []string{"sl", "sl:n"}},
	{"5", []string{"sw"}},
	{"6", []string{"gc"}},
	{"7", []string{"cc"}},
}

// specOf returns the layout of p's algorithm.
func specOf(p *ratelimit.Policy) *spec {
	if isSCG(p) {
		return &scgSpec
	}
	switch p.Algorithm() {
	case ratelimit.TokenBucket:
		return &specs[0]
	case ratelimit.LeakyBucket:
		return &specs[1]
	case ratelimit.FixedWindow:
		return &specs[2]
	case ratelimit.SlidingLog:
		return &specs[3]
	case ratelimit.SlidingWindow:
		return &specs[4]
	case ratelimit.GCRA:
		return &specs[5]
	case ratelimit.Concurrency:
		return &specs[6]
	}
	panic("redis store: policy with unknown algorithm " + string(p.Algorithm()))
}

// tag returns the hash tag of a request key.
func tag(key string) string {
	sum := sha256.Sum256([]byte(key))
	return base64.RawURLEncoding.EncodeToString(sum[:tagBytes])
}

// appendKeys appends the Redis keys of one limit with the given tag.
func appendKeys(dst []string, prefix, tag string, sp *spec) []string {
	for _, suf := range sp.suffixes {
		dst = append(dst, prefix+":{"+tag+"}:"+suf)
	}
	return dst
}

// slot returns the Redis Cluster hash slot of every key with the given tag:
// CRC16 (XMODEM) of the tag, modulo 16384.
func slot(tag string) uint16 {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^tag[i]]
	}
	return crc & 16383
}

// crcTable is the CRC16-CCITT (XMODEM, polynomial 0x1021) table Redis uses.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
