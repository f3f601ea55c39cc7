//go:build !linux

package benchproc

// LoadAvg is not known outside Linux: it returns "n/a".
func LoadAvg() string { return "n/a" }
