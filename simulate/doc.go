// Package simulate runs rate-limit policies against traffic on virtual time
// and reports what each one admits: the engine behind `sluice simulate` and
// the charts in docs/algorithms.md.
//
// A simulation is deterministic. Traffic comes from a [Pattern] (steady,
// burst, boundary, on/off, Poisson with a seed, or a recorded trace), every
// request is decided by the production code path, a memory store
// ([memory.Store]) reading a [ratelimit.ManualClock] that is set to each
// request's time, and the results are plain counts: a per-step timeline
// of [Bucket]s, a per-policy [Summary], a text report ([Report.WriteText]) and a
// chart with one panel per policy ([Report.WriteChart]). The same inputs give the
// same output byte for byte.
//
// [Main] is the command-line entry point; package internal/cli calls it for
// `sluice simulate`.
package simulate
