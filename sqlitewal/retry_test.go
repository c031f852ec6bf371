package sqlitewal

import (
	"errors"
	"testing"
)

func TestRetryBusy(t *testing.T) {
	tries := 0
	err := RetryBusy(func() error {
		if tries++; tries < 3 {
			return errors.New("database is locked (5) (SQLITE_BUSY)")
		}
		return nil
	})
	if err != nil || tries != 3 {
		t.Errorf("busy twice, then fine: err %v after %d tries", err, tries)
	}
	tries = 0
	other := errors.New("file is not a database")
	if err := RetryBusy(func() error { tries++; return other }); err != other || tries != 1 {
		t.Errorf("another error is returned at once: %v after %d tries", err, tries)
	}
}
