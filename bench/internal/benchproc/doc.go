// Package benchproc holds the process plumbing the benchmark tools share
// beyond internal/redistest (redis-server and ports) and
// internal/sluicetest (the sluice binary): process CPU time and report
// output.
package benchproc
