//go:build !unix

package outbox

// fileID is "" where the file system's identity of a file is not known:
// a copied outbox keeps its identity there (the limit docs/replication.md
// names).
func fileID(string) string { return "" }
