// Package baseline benchmarks sluice's memory store against
// golang.org/x/time/rate, the baseline its targets are stated against
// (BENCHMARKS.md): one key, and 100k keys behind one mutex. It has only
// tests; bench/cmd/pairbench runs them in interleaved pairs.
package baseline
