package httplimit

import "strconv"

// StateKey returns the store key of one budget: the state of the key value
// parts under policy for limit limitID of route (docs/semantics.md §4.3:
// state belongs to route, limit, policy and key). Every component is written
// length-prefixed, "<len>:<bytes>", so the encoding is injective: two
// different tuples never give the same key, whatever bytes the values
// contain. For example route "api", limit "0", policy "per-user" and key "u1"
// give "3:api1:08:per-user2:u1".
//
// The result may contain any byte; a store that gives bytes meaning (Redis
// Cluster hash tags, for one) must escape or hash it.
func StateKey(route, limitID, policy string, parts []string) string {
	n := 3 * 21
	for _, p := range parts {
		n += len(p) + 21
	}
	b := make([]byte, 0, n+len(route)+len(limitID)+len(policy))
	b = appendStateKeyPrefix(b, route, limitID, policy)
	for _, p := range parts {
		b = appendLenPrefixed(b, p)
	}
	return string(b)
}

// AnonymousStateKey returns the store key of the budget that on_empty_key
// "anonymous" shares among every request without a key value. It is the
// prefix StateKey writes followed by "-", which can start no length prefix, so
// no key value can reach it.
func AnonymousStateKey(route, limitID, policy string) string {
	b := make([]byte, 0, 3*21+len(route)+len(limitID)+len(policy)+1)
	b = appendStateKeyPrefix(b, route, limitID, policy)
	return string(append(b, anonymousMarker))
}

// anonymousMarker ends an anonymous state key where a part's length would
// start; a length is always a decimal digit.
const anonymousMarker = '-'

func appendStateKeyPrefix(b []byte, route, limitID, policy string) []byte {
	b = appendLenPrefixed(b, route)
	b = appendLenPrefixed(b, limitID)
	return appendLenPrefixed(b, policy)
}

func appendLenPrefixed(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}
