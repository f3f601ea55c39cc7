// Package benchproc holds the process plumbing the benchmark tools share:
// a throwaway redis-server child on a loopback port, free-port selection,
// the death signal for children, process CPU time and report output.
package benchproc
