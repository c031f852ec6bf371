package gateway

// ledgerDigest is the op-id ledger's digest of a call's arguments
// (callDigests).
func ledgerDigest(key []byte, args map[string]any) string {
	_, ledger, _ := callDigests(key, "", "", args)
	return ledger
}

// legacyArgsDigest is the unkeyed digest of a call's arguments
// (callDigests).
func legacyArgsDigest(args map[string]any) string {
	_, _, legacy := callDigests(nil, "", "", args)
	return legacy
}
