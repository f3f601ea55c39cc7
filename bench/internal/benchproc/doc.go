// Package benchproc holds the plumbing the benchmark tools share beyond
// internal/redistest (redis-server and ports) and internal/sluicetest (the
// sluice binary): the CPU time of a process or of a process tree and its
// descendants, the load average, a sluice gateway's store trouble from its
// metrics, writing and reading the Markdown reports, and list flags.
package benchproc
