// Package benchproc holds the process plumbing the benchmark tools share
// beyond internal/redistest (redis-server and ports) and
// internal/sluicetest (the sluice binary): the CPU time of a process or of a
// process tree, its descendants, and report output.
package benchproc
