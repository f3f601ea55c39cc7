package httplimit

// KeyOf appends to dst the key parts of limit i (in Limits order) resolved
// for r, as Options.Observe's Verdict.Key would hold them, and reports
// whether the key has a value: false when a part is empty, so that the
// limit would skip r, count it anonymously or refuse it. It counts nothing
// and asks no store: a caller that names r's client by its keys before the
// decision (the gateway's load shedding) uses it. It is safe for concurrent
// use; i must be within Limits.
func (m *Middleware) KeyOf(r Request, i int, dst []string) ([]string, bool) {
	ok := true
	key := m.limits[i].Key
	for j := range key {
		v := m.rv.value(&key[j], r)
		if v == "" {
			ok = false
		}
		dst = append(dst, v)
	}
	return dst, ok
}
