//go:build race

package testbed

// raceDetector: built with the race detector (see WaitingTests).
const raceDetector = true
