package gateway

import (
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/joakimp/devbox-config/invisible"
)

// lookalike maps the Cyrillic, Greek, Armenian and Latin-extension letters
// that look like a Latin letter to it (each case as it looks: Greek Η is
// H, η is n), and the digits 0 and 1 to o and l. A small table rather than UTS #39's full confusables: the
// Go library that implements the skeleton (mtibben/confusables) is
// unmaintained since 2021 (Unicode 13 data) and builds a 6,000-entry map
// at every container start; names on one fleet's coordination log are
// short and typed by an operator, and this table covers the look-alikes
// one keyboard layout switch gives. A table inside the function, so nothing
// is built at init.
func lookalike(r rune) rune {
	for _, l := range [...]struct {
		latin rune
		like  string
	}{
		{'A', "АΑ"}, {'B', "ВΒ"}, {'C', "СϹ"}, {'E', "ЕΕ"}, {'H', "НΗ"}, {'I', "ІΙӀ"}, {'J', "Ј"}, {'K', "КΚ"}, {'M', "МΜ"}, {'N', "Ν"},
		{'O', "ОΟՕ"}, {'P', "РΡ"}, {'Q', "Ԛ"}, {'S', "Ѕ"}, {'T', "ТΤ"}, {'W', "Ԝ"}, {'X', "ХΧ"}, {'Y', "УΥҮ"}, {'Z', "Ζ"},
		{'a', "аαɑ"}, {'b', "вь"}, {'c', "сϲ"}, {'d', "ԁ"}, {'e', "еε"}, {'g', "ɡց"}, {'h', "һнհ"}, {'i', "іιıɩ"}, {'j', "јϳȷ"},
		{'k', "кκ"}, {'l', "ӏ1"}, {'m', "м"}, {'n', "пη"}, {'o', "оοօ0"}, {'p', "рρ"}, {'q', "ԛ"}, {'r', "г"}, {'s', "ѕ"},
		{'t', "тτ"}, {'u', "υս"}, {'v', "ν"}, {'w', "ԝ"}, {'x', "хχ"}, {'y', "уγү"},
	} {
		if strings.ContainsRune(l.like, r) {
			return l.latin
		}
	}
	return r
}

// skeleton is what name looks like, for telling whether two names could
// be taken for each other: compatibility forms folded and combining marks
// dropped (NFKD: fullwidth and mathematical letters are letters, ś is s),
// spaces dropped, look-alike letters mapped to the Latin ones, case
// folded, i read as l (a capital I reads as either), the . - _ that lead
// or trail either side of the @ dropped, and the letter pairs that pass
// for one letter (rn m, vv w, cl d) folded. Names in other scripts keep
// their letters: only a name that looks like another device's is refused.
func skeleton(name string) string {
	s := strings.ToLower(strings.Map(lookalike, strings.Join(strings.Fields(norm.NFKD.String(name)), "")))
	s = strings.Map(func(r rune) rune {
		switch {
		case unicode.Is(unicode.Mn, r):
			return -1
		case r == 'i':
			return 'l' // a capital I reads as l, and as i in another case
		}
		return r
	}, s)
	parts := strings.Split(s, "@")
	for i, p := range parts {
		parts[i] = strings.Trim(p, ".-_")
	}
	return strings.NewReplacer("rn", "m", "vv", "w", "cl", "d").Replace(strings.Join(parts, "@"))
}

// firstInvisible is the first character of s a reader cannot see or a
// terminal acts on (invisible.Is; false if none): in a label or an agent
// name it makes two names look alike, or rewrites the terminal that
// prints it.
func firstInvisible(s string) (rune, bool) {
	for _, r := range s {
		if invisible.Is(r) {
			return r, true
		}
	}
	return 0, false
}

// checkNames refuses what would let one device pass as another on the
// coordination log: an invisible character in a label or agent name, a
// device id that differs from another's only in case, and a label or
// agent name that looks like another device's (the same skeleton), or an
// agent whose @label part looks like another device's label. An agent
// name another device has lets a device read that device's mailbox and
// answer its asks; a look-alike label or id deceives whoever reads one.
//
// The devices whose names are in settled (nameKeys, before an operator's
// change) are read first: of two that look alike, the one changed is the
// one refused.
func (c *Config) checkNames(settled map[string]bool) error {
	order := make([]int, 0, len(c.Devices))
	for _, first := range []bool{true, false} {
		for i, d := range c.Devices {
			if settled[d.nameKey()] == first {
				order = append(order, i)
			}
		}
	}
	ids, labels := map[string]owner{}, map[string]owner{}
	for _, i := range order {
		d := c.Devices[i]
		at := fmt.Sprintf("devices[%d]", i)
		if o, ok := ids[strings.ToLower(d.ID)]; ok && o.name != d.ID {
			return fmt.Errorf("%s.id: %q differs only in case from device %s (devices[%d]): one reads as the other in audit lines and trust lists (fix: give each device an id of its own)", at, d.ID, o.name, o.dev)
		}
		ids[strings.ToLower(d.ID)] = owner{d.ID, i}
		if r, bad := firstInvisible(d.Label); bad {
			return fmt.Errorf("%s.label: %+q holds a control, bidi or zero-width character (U+%04X), which shows one label as another or rewrites the terminal that prints it (fix: remove it)", at, d.Label, r)
		}
		if k := skeleton(d.Label); d.Label != "" {
			if o, ok := labels[k]; ok {
				return fmt.Errorf("%s.label: %+q looks like %q, the label of device %s (devices[%d]) (fix: give each device a label of its own, one no other device's looks like)", at, d.Label, o.name, c.Devices[o.dev].ID, o.dev)
			}
			labels[k] = owner{d.Label, i}
		}
	}
	agents := map[string]owner{}
	for _, i := range order {
		for j, a := range c.Devices[i].Agents {
			if err := checkAgent(c, fmt.Sprintf("devices[%d].agents[%d]", i, j), a, i, agents, labels); err != nil {
				return err
			}
			agents[skeleton(a)] = owner{a, i}
		}
	}
	return nil
}

// nameKey is what of d checkNames reads: its id, label and agents.
func (d *Device) nameKey() string {
	return strings.Join(append([]string{d.ID, d.Label}, d.Agents...), "\x00")
}

// nameKeys is the nameKey of every device of c.
func (c *Config) nameKeys() map[string]bool {
	out := make(map[string]bool, len(c.Devices))
	for i := range c.Devices {
		out[c.Devices[i].nameKey()] = true
	}
	return out
}

// owner is a name and the index of the device that has it.
type owner struct {
	name string
	dev  int
}

// checkAgent refuses agent a of device dev (at) when it holds an
// invisible character, looks like an agent listed before it (agents),
// or its @label part looks like another device's label (labels).
func checkAgent(c *Config, at, a string, dev int, agents, labels map[string]owner) error {
	if r, bad := firstInvisible(a); bad {
		return fmt.Errorf("%s: %+q holds a control, bidi or zero-width character (U+%04X), which shows one agent as another (fix: remove it)", at, a, r)
	}
	if o, ok := agents[skeleton(a)]; ok {
		switch {
		case o.dev == dev:
			return fmt.Errorf("%s: %+q looks like %q, listed before it (fix: list each agent once)", at, a, o.name)
		case o.name == a:
			return fmt.Errorf("%s: %q is also an agent of device %s (devices[%d]): each device would read the other's mailbox and could answer its asks (fix: give each device its own agents, <harness>@<its label>)", at, a, c.Devices[o.dev].ID, o.dev)
		}
		return fmt.Errorf("%s: %+q looks like %q, an agent of device %s (devices[%d]): one could pass for the other on the coordination log (fix: give each device its own agents, <harness>@<its label>, one no other device's looks like)", at, a, o.name, c.Devices[o.dev].ID, o.dev)
	}
	if _, label, ok := strings.Cut(a, "@"); ok {
		if o, found := labels[skeleton(label)]; found && o.dev != dev {
			return fmt.Errorf("%s: %+q names %q, the label of device %s (devices[%d]): its asks would read as that device's (fix: <harness>@<this device's own label>)", at, a, label, c.Devices[o.dev].ID, o.dev)
		}
	}
	return nil
}
