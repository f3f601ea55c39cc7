//go:build !race

package memory

// raceEnabled reports whether the race detector is on; heavy tests scale
// down under it.
const raceEnabled = false
