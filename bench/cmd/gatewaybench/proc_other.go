//go:build !linux

package main

// loadAvg is not available outside Linux.
func loadAvg() string { return "n/a" }
