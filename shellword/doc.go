// Package shellword quotes a string as one POSIX shell word, for the
// commands devbox-config prints for a user to paste (a path with a space
// or a `$(...)` in it must not split or run).
package shellword
