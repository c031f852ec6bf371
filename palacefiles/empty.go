package palacefiles

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // Chroma's store is a SQLite file

	"github.com/joakimp/devbox-config/sqlitewal"
)

// ChromaFile is the default backend's store in a palace directory.
const ChromaFile = "chroma.sqlite3"

// Empty reports that the palace in dir holds no drawers yet: it has no
// ChromaFile, or one in which Chroma keeps no collection. An error means
// the files could not tell (unreadable, another layout): the caller must
// not read that as empty.
func Empty(dir string) (bool, error) {
	file := filepath.Join(dir, ChromaFile)
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		return true, nil
	} else if err != nil {
		return false, err
	}
	// Read-only, and never creating anything: MemPalace may have the file
	// open. A query that fails (a locked or other schema) tells nothing.
	db, err := sql.Open("sqlite", sqlitewal.URI(file)+"?mode=ro&_pragma=busy_timeout(200)")
	if err != nil {
		return false, fmt.Errorf("%s: %w", file, err)
	}
	defer db.Close() // read-only: nothing to lose
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM collections").Scan(&n); err != nil {
		return false, fmt.Errorf("%s: %w", file, err)
	}
	return n == 0, nil
}
