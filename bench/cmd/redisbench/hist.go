package main

import (
	"math/bits"
	"time"
)

// Histogram layout: values below 2^(subBits+1) ns get one bucket each; above
// that, each power of two is split into 2^subBits equal buckets, so a
// reported quantile is within 1/2^subBits (about 1.6%) of the true one. Its
// size is fixed (about 19 KiB) whatever the number of samples.
const (
	subBits    = 6
	subCount   = 1 << subBits
	linearTop  = 2 * subCount // values below this are exact
	maxExp     = 34           // values are clamped below 2^(maxExp+subBits+1) ns, about 36 minutes
	histLength = linearTop + maxExp*subCount
	histMax    = int64(1)<<(maxExp+subBits+1) - 1
)

// histogram is a fixed-size log-linear latency histogram in nanoseconds. It
// is not safe for concurrent use: each worker keeps its own and they are
// merged at the end.
type histogram struct {
	counts [histLength]uint64
	total  uint64
}

// bucketOf returns the bucket index of v nanoseconds.
func bucketOf(v int64) int {
	v = min(max(v, 0), histMax)
	if v < linearTop {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - (subBits + 1) // ≥ 1
	m := v >> e                                // in [subCount, 2·subCount)
	return linearTop + (e-1)*subCount + int(m-subCount)
}

// bucketRange returns the smallest and largest value that fall in bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < linearTop {
		return int64(i), int64(i)
	}
	e := (i-linearTop)/subCount + 1
	m := int64((i-linearTop)%subCount + subCount)
	return m << e, (m+1)<<e - 1
}

// record adds one sample.
func (h *histogram) record(d time.Duration) {
	h.counts[bucketOf(int64(d))]++
	h.total++
}

// merge adds every sample of o to h.
func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
}

// quantile returns the q-quantile (0 < q ≤ 1) as the midpoint of the bucket
// holding the sample of rank ⌈q·total⌉, or 0 for an empty histogram.
func (h *histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(q * float64(h.total))
	if float64(rank) < q*float64(h.total) {
		rank++
	}
	rank = min(max(rank, 1), h.total)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			return time.Duration(lo + (hi-lo)/2)
		}
	}
	return 0 // unreachable: seen reaches total
}
