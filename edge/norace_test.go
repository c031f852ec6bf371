//go:build !race

package edge

// raceEnabled: built without the race detector.
const raceEnabled = false
