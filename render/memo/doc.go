// Package memo is render's start memo: what one render that changed nothing
// read and printed, so that the next container start running the same
// command can answer from it, without planning and before the edge's and
// gateway's packages initialise (package memo/atstart).
//
// A render is a function of what it reads: the environment (through
// render.Options.Env), PATH look-ups (Options.LookPath), the files its
// System reads (ReadFile, Lstat, EvalSymlinks) and the directories it scans
// for stale temp files. A Recorder wraps each of those, so the memo holds
// every input by construction, each with the answer it got: a file as a
// sum of its bytes (never the bytes: a user's config may hold their own
// keys), a variable as a sum of its value, and a secret (MEMPALACE_*TOKEN)
// only as blank or not, which is all render uses of it. Check asks every
// question again and answers only when every answer is the same; then the
// recorded output (stderr and exit status) is what a full run would print.
// An answer a check cannot reproduce exactly (a read that failed other
// than by the file not existing, a link that did not resolve) never holds,
// so that start plans in full, as does any start after a change.
//
// Only a plain start is memoised: `render` with at most --home (an absolute
// path), --target, --strict and --reclaim. A dry run, a run that printed on
// stdout, and a run that met a temp file (a killed write's, which a full
// run may clean) leave no memo. A run that wrote is not memoised either
// (what it read is gone), so cmd/devbox-config runs the start after it at
// once, unseen, and keeps that one's memo: the first start after a change
// pays for two renders, and every start after it is answered.
//
// A memo is trusted only from the user running the start: Load refuses a
// file another user owns, a link and a special file, and parse any exit
// status but 0 and 1. It answers only the build that wrote it (path, size,
// times, inode and the Go build ID). A start whose environment holds a URL
// with a password in it (which the ladder refuses) leaves no memo, so no
// sum of the password is kept.
//
// The memo is part of render's record. It lives at
// $XDG_CACHE_HOME/devbox-config/render-memo (without XDG_CACHE_HOME, and
// always with --home, <home>/.cache/devbox-config/render-memo), mode 0600,
// in a line format of its own (format.go). cmd/devbox-config writes it
// only where every existing entry from the home (or $XDG_CACHE_HOME) down
// belongs to the user running render: root rendering over a user's home
// writes none there. Deleting it costs one start a full plan; a corrupt
// memo is ignored and replaced.
package memo
