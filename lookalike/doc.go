// Package lookalike is the one answer to "could one name be taken for
// another?" (Skeleton, by Unicode's confusables data, UTS #39, in a
// generated table): the gateway refuses a device's label or agent that
// looks like another device's, and a write to a wing that looks like the
// instruction wing, and an edge refuses that write up front, with the
// same function.
package lookalike
