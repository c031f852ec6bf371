// Package palacefiles is what the project reads from the directory where
// MemPalace keeps a palace, without asking MemPalace: whether a
// directory holds a palace (Is), and whether the palace holds drawers yet. MemPalace 3.11.0 answers every drawer read of a
// palace without a drawer collection with an error ("Chroma database
// missing" while chroma.sqlite3 does not exist, "No palace found" from a
// search, which creates the file without a collection, and "Backend open
// failed" after that), the same answer a broken backend gives. The files
// tell the two apart: the edge reads such a palace as empty, not failed,
// join sends its facts with no drawers to read, and doctor does not call
// it one that holds data.
package palacefiles
