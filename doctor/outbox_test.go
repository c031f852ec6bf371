package doctor

import (
	"errors"
	"fmt"
	"testing"
)

// A lock another process holds past the busy retries leaves the outbox
// whole: not outbox-dead's, whose fix moves it aside and loses what it
// queued (review33 R4); a file that is no database is.
func TestALockedOutboxIsNotUnusable(t *testing.T) {
	t.Parallel()
	if UnusableOutbox(fmt.Errorf("outbox /p/edge/outbox.sqlite: %w", errors.New("database is locked (5) (SQLITE_BUSY)"))) {
		t.Error("a locked outbox is called unusable")
	}
	if !UnusableOutbox(fmt.Errorf("outbox /p/edge/outbox.sqlite is not a usable SQLite database: %w", errors.New("file is not a database (26)"))) {
		t.Error("a file that is no database is not called unusable")
	}
}
