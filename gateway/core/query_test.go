package core

import (
	"net/url"
	"testing"
)

// FuzzCheckQuery: checkQuery refuses exactly the query strings
// url.ParseQuery refuses (ParseQuery is what ReverseProxy and the query
// keys go by).
func FuzzCheckQuery(f *testing.F) {
	for _, s := range []string{"", "a=1", "a=1&b=2", "a=1;b=2", "a=%zz", "a=%", "a=%4", "a=%41", "%", "&&", "=", "a=b=c", "a+b=%20", "k=a%3Bb", "x=%g1", "%41=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		_, perr := url.ParseQuery(raw)
		if cerr := checkQuery(raw); (cerr == nil) != (perr == nil) {
			t.Fatalf("checkQuery(%q) = %v, url.ParseQuery: %v", raw, cerr, perr)
		}
	})
}
