// Package invisible is the one answer to "does this character show as
// nothing, or act instead of showing?", for every place that shows or
// accepts a name or text another device wrote: the mailbox's Printable
// (escapes it), the ladder's agent-name check and the gateway's device
// names (refuse it). They agree because they ask the same function.
package invisible
