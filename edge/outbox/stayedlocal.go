package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// StayedLocal counts the writes the local palace took that an edge could
// not put in the outbox (a full disk): nothing sends them to the primary
// and no op names them; `devbox-config join`, which compares the local
// palace with the primary by content, does. The edge keeps the count
// while the outbox refuses it too, and adds it here once a write of its
// goes through (or at its stop), so `edge status` and doctor can say so.
type StayedLocal struct {
	N     int       `json:"n"`
	Since time.Time `json:"since"` // the first of them
	Last  time.Time `json:"last"`  // the latest of them
}

// String says it for `edge status` and doctor, with the fix.
func (sl StayedLocal) String() string {
	return fmt.Sprintf("%d write(s) stayed in the local palace only while the outbox could not record them (since %s): no op sends them to the primary; run `devbox-config join` (it sends what the primary lacks), once the outbox's disk has space", sl.N, sl.Since.Local().Format(time.RFC3339))
}

// metaStayedLocal is the meta key of the StayedLocal record (times in
// Unix milliseconds).
const metaStayedLocal = "stayed_local"

// NoteStayedLocal adds sl to the record, in one statement: every edge
// process on the palace adds its own count.
func (s *Store) NoteStayedLocal(ctx context.Context, sl StayedLocal) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES(?, json_object('n', ?, 'since', ?, 'last', ?))
		ON CONFLICT(key) DO UPDATE SET value=json_object(
			'n', json_extract(value, '$.n') + json_extract(excluded.value, '$.n'),
			'since', min(json_extract(value, '$.since'), json_extract(excluded.value, '$.since')),
			'last', max(json_extract(value, '$.last'), json_extract(excluded.value, '$.last')))`,
		metaStayedLocal, sl.N, sl.Since.UnixMilli(), sl.Last.UnixMilli())
	if err != nil {
		return fmt.Errorf("outbox: recording %d write(s) that stayed local: %w", sl.N, err)
	}
	return nil
}

// ClearStayedLocal drops the record once a join that read the local
// palace at readAt has sent what it lacked: only if its last write came
// before, or a later one would be forgotten unsent.
func (s *Store) ClearStayedLocal(ctx context.Context, readAt time.Time) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM meta WHERE key=? AND json_extract(value, '$.last') < ?`, metaStayedLocal, readAt.UnixMilli()); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// StayedLocal reads the record (nil: none).
func (s *Store) StayedLocal(ctx context.Context) (*StayedLocal, error) {
	return stayedLocal(ctx, s.db)
}

// stayedLocal reads the record (nil: none).
func stayedLocal(ctx context.Context, q querier) (*StayedLocal, error) {
	v, err := querierMeta(ctx, q, metaStayedLocal)
	if err != nil || v == "" {
		return nil, err
	}
	var raw struct{ N, Since, Last int64 }
	if err := json.Unmarshal([]byte(v), &raw); err != nil {
		return nil, fmt.Errorf("outbox: %s %q: %w", metaStayedLocal, v, err)
	}
	return &StayedLocal{N: int(raw.N), Since: time.UnixMilli(raw.Since), Last: time.UnixMilli(raw.Last)}, nil
}
