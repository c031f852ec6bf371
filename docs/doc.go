// Package docs holds the project's documentation by audience (devbox.md for
// devbox users, operator.md for whoever runs the fleet, development.md for
// contributors, cli.md generated from the commands' help, rfc/ the design it
// implements, kept as written) and the tests that keep it and the README
// true: every link resolves inside the repository, every page citing an RFC
// links it, operator.md names every doctor finding id,
// and the README's hands-on runs as written in a fresh clone with a fresh
// HOME (TestREADMEHandsOn, integration tier).
package docs
