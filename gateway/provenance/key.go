package provenance

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/joakimp/devbox-config/catalogue"
)

// Kind is what a Key identifies.
type Kind string

const (
	// KindDrawer: a drawer (a diary entry too) by its logical id.
	KindDrawer Kind = "drawer"
	// KindEvent: a coordination event or artifact by its id.
	KindEvent Kind = "event"
	// KindFact: a knowledge-graph fact by subject, predicate, object and
	// validity (valid_from, and valid_to once it is closed), as MemPalace
	// normalizes them.
	KindFact Kind = "fact"
	// KindDiary: a diary entry by agent, timestamp and the sha256 of its
	// text (diary_read carries no ids).
	KindDiary Kind = "diary"
	// KindTunnel: a tunnel (its label, the text its writer chose) by its
	// id (MemPalace's, from its two rooms).
	KindTunnel Kind = "tunnel"
)

func (k Kind) String() string { return string(k) }

// Key identifies one record in the index.
type Key struct {
	Kind  Kind
	Parts []string // the kind's columns, in order
}

// Drawer is the key of a drawer or diary entry by id.
func Drawer(id string) Key { return Key{KindDrawer, []string{id}} }

// Event is the key of a coordination event or artifact by id.
func Event(id string) Key { return Key{KindEvent, []string{id}} }

// Tunnel is the key of a tunnel by id.
func Tunnel(id string) Key { return Key{KindTunnel, []string{id}} }

// Fact is the key of a fact, normalized as MemPalace stores it: subject
// and object by entity id (trimmed, lower-cased, spaces to '_', "'"
// dropped), the predicate trimmed, lower-cased, spaces to '_', and its
// validity: valid_from ("" when the fact has none) and, for a closed fact,
// ".." and valid_to, each trimmed with "+00:00" as "Z". A closed fact's
// key is not the open one's: a fact filed again after it was closed is
// another fact, whose writer may be another device (attack22 F8). (The
// validity is one column, the one named valid_from, so the index kept
// its schema when closed facts got keys of their own: an open fact's key
// is as it was.)
func Fact(subject, predicate, object, validFrom, validTo string) Key {
	validity := Temporal(validFrom)
	if vt := Temporal(validTo); vt != "" {
		validity += ".." + vt
	}
	return Key{KindFact, []string{catalogue.EntityID(subject), catalogue.PredicateID(predicate), catalogue.EntityID(object), validity}}
}

// Temporal is a valid_from or valid_to as MemPalace stores it and the
// index holds it: trimmed, "+00:00" as "Z".
func Temporal(v string) string {
	v = strings.TrimSpace(v)
	if s, ok := strings.CutSuffix(v, "+00:00"); ok {
		v = s + "Z"
	}
	return v
}

// Instant is a KG date or datetime as MemPalace takes them (YYYY-MM-DD,
// YYYY-MM-DDTHH:MM:SSZ) in the second's form, so two compare as text; a
// date is its midnight, as MemPalace stores a supersede's.
func Instant(v string) string {
	if v = Temporal(v); len(v) == len("2006-01-02") {
		v += "T00:00:00Z"
	}
	return v
}

// Diary is the key of a diary entry (or one chunk of one) by its agent
// (trimmed, lower-cased, as MemPalace stores it), its timestamp and its
// text.
func Diary(agent, timestamp, text string) Key {
	sum := sha256.Sum256([]byte(text))
	return Key{KindDiary, []string{catalogue.PythonLower(strings.TrimSpace(agent)), timestamp, hex.EncodeToString(sum[:])}}
}

// mapKey is the key in memory: the kind and each part length-prefixed,
// so no two keys share one.
func (k Key) mapKey() string {
	b := make([]byte, 0, 64)
	b = append(b, k.Kind...)
	for _, p := range k.Parts {
		b = append(strconv.AppendInt(append(b, '|'), int64(len(p)), 10), ':')
		b = append(b, p...)
	}
	return string(b)
}
