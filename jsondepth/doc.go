// Package jsondepth bounds how deeply JSON from a peer may nest before a
// recursive reader sees it. gjson validates, and segmentio's decoder
// reads, by recursion: JSON nested millions deep (a few megabytes, within
// what the gateway reads from its upstream) grows a goroutine's stack
// past Go's limit, a fatal error no recover catches. The edge checks an
// agent's messages against the go-sdk's own bound the same way.
package jsondepth
