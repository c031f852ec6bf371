//go:build race

package edge

// raceEnabled: built with the race detector, whose tier keeps go test's
// default parallelism (its tests are slower and more timing-sensitive).
const raceEnabled = true
