//go:build !race

package testbed

// raceDetector: built without the race detector (see WaitingTests).
const raceDetector = false
