package doctor

// Kind is one line of doctor's catalogue: finding ids of one kind, the RFC
// 001 section they come from, and what they mean.
type Kind struct {
	IDs     []string
	Section string
	About   string
}

// Catalogue is every finding id doctor can emit, in the order `doctor
// --help` lists them (TestCatalogueHasEveryID holds it to the ids declared
// in this package).
func Catalogue() []Kind {
	return []Kind{
		{[]string{IDEnvFallback, IDEnvUnknown, IDEnvDuplicate}, "§1.2", `a value render cannot use (and the fall-back it takes), a name nobody reads ("did you mean"), a name .env assigns twice`},
		{[]string{IDEdgeSettings}, "§1.2", "an edge timeout or lease that is not a duration: the default is used"},
		{[]string{IDWeakToken}, "§6.2", "a token under 16 characters"},
		{[]string{IDKGSplit, IDEntitiesSplit}, "§7.1", "two files for one store"},
		{[]string{IDHallwaysSplit}, "§7.1", "a pre-3.3.6 ~/.mempalace/hallways.json MemPalace ignores"},
		{[]string{IDPalaceLocation}, "§7.1", "an earlier edge's outbox left in ~/.mempalace/palace"},
		{[]string{IDPalaceSharedParent}, "§7.1", "the palace's parent directory holds another palace: they share tunnels.json"},
		{[]string{IDEmbedderSidecar}, "§7.4", "edge mode: embedder identity"},
		{[]string{IDEdgeVolume}, "§1.2", "edge palace not on a volume"},
		{[]string{IDStrayServer}, "§1.2", "edge mode: a mempalace-mcp on the palace no edge started (names its pid)"},
		{[]string{IDPalaceDamaged}, "§1.2", "the palace's SQLite files fail quick_check"},
		{[]string{IDVectorIndex}, "§1.2", "the drawers' vector index is missing or an empty stand-in: MemPalace refuses writes"},
		{[]string{IDRebuildCopyOutbox}, "§1.2", "an edge outbox left in MemPalace's pre-rebuild copy"},
		{[]string{IDEnvPermissions, IDTokenInConfig, IDTokenCleartext}, "R3", "the token where others read it (plain http off this host: doctor sends it to a private address only)"},
		{[]string{IDProposedPending}, "§4.1", "a .proposed nobody merged"},
		{[]string{IDRenderRecord}, "§4.1", "an unreadable .devbox-config.json: render keeps every entry"},
		{[]string{IDRenderRefuses}, "§4.1", "a harness config render would leave alone (unparseable, read-only, a dangling link) or keep on your own entry"},
		{[]string{IDEntryCommand}, "§4.1", "a harness's MemPalace entry runs a command that is not there"},
		{[]string{IDEntryLocalBin}, "§4.1", "an entry's mempalace-mcp is only in ~/.local/bin, not on PATH"},
		{[]string{IDConfigShadowed}, "§4.1", "a harness config the harness ignores (Amp: settings.json hides settings.jsonc)"},
		{[]string{IDEntryUnused}, "§4.1", "a setting beside the entry makes the harness not use it (blocked, disabled, shadowed, merged into), or a project config in or above the cwd replaces it (opencode, Gemini)"},
		{[]string{IDPiExtensionNoEdge}, "§4.1", "edge mode, but pi's own MemPalace extension keeps pi in remote mode (it has no edge branch)"},
		{[]string{IDPrimaryUnreachable, IDPrimaryAuth, IDHostPin, IDOriginHeader}, "§6.2", "/healthz, tools/list (401), 403 behind a proxy; behind a gateway: the device's own token"},
		{[]string{IDGatewayUpstream}, "§6.2", "the gateway's upstream failed"},
		{[]string{IDDeviceIdentity}, "§6.2", ".env's device, label or agent is not what the gateway says the token is; info: no agent name (the mailbox has no identity)"},
		{[]string{IDSyncShared}, "§7.2", "remote mode reaches mempalace_sync"},
		{[]string{IDOutboxDead, IDOutboxBacklog}, "§4.3", "the edge's queue"},
		{[]string{IDOutboxHeld}, "§5", "writes held unsent while policy.json does not parse"},
		{[]string{IDOutboxInDoubt}, "§4.3", "writes that may or may not have reached the primary (edge outbox delivered or retry)"},
		{[]string{IDOutboxIntents}, "§4.3", "writes queued by an edge stopped before the palace answered: edge flush sends them"},
		{[]string{IDOutboxStayedLocal}, "§4.3", "writes the outbox could not record (any cause): no op sends them, join does"},
		{[]string{IDStayedLocalRecord}, "§4.3", "the record of those writes cannot be read: none is reported"},
		{[]string{IDOutboxCopied}, "§6.2", "info: the outbox is a copy of another's, under the same device id (a copied HOME)"},
		{[]string{IDOutboxOlder}, "§4.3", "info: the outbox was made by an older build; the next edge command migrates it"},
		{[]string{IDOutboxNewer}, "§4.3", "the outbox was made by a newer release: this build cannot read it; run that release (keep the file)"},
		{[]string{IDOutboxStorage}, "§4.3", "the outbox's disk is full, read-only or not this user's (the file is whole: keep it)"},
		{[]string{IDJoinInterrupted}, "§4.4", "a join that stopped half-way: its queued records wait for join --resume"},
	}
}
