// Package simulate runs rate-limit policies against traffic on virtual time
// and reports what each one admits. It is the library behind
// `sluice simulate` and the charts in docs/algorithms.md.
//
// A [Simulation] pairs a traffic [Pattern] (steady, burst, boundary, on/off,
// Poisson with a seed, or recorded events such as those [ReadTrace] reads)
// with the policies to judge it, each a [Spec]. [Simulation.Run] decides
// every request by the production code path, a memory store
// ([memory.Store]) reading a [kit.ManualClock] that is set to each
// request's time, and returns a [Report]: a per-step timeline of [Bucket]s
// and a per-policy [Summary] per spec, written as text ([Report.WriteText])
// or as a chart with one panel per policy ([Report.WriteChart]). [Run] is
// the bare engine: the verdicts on given events, without the counting.
// [CompareSpecs] gives the six algorithms with equivalent parameters.
//
// A simulation is deterministic: the same inputs give the same output byte
// for byte.
package simulate
