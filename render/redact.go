package render

import (
	"regexp"
	"strings"
)

// Redacted stands for a secret in what render prints.
const Redacted = "[redacted]"

// minRedact is the shortest MEMPALACE_REMOTE_TOKEN value searched for in
// printed text: a shorter one would match ordinary text by accident.
const minRedact = 8

// credential is a field whose name says it holds a credential (a header
// or key such as Authorization, token, apiKey, api_key, secret, password)
// and its value on the same line, in JSON, YAML or TOML: quoted, or bare
// to the end of the line, a comment or a separator.
var credential = regexp.MustCompile(`(?i)((?:^|[\s{,"'])[\w.-]*(?:authorization|token|api[-_]?key|secret|password)[\w.-]*["']?\s*[:=]\s*)("(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\s"'#,{}\[\]][^\n#,{}\[\]]*)`)

// scheme keeps an Authorization value's scheme (Bearer, Basic) readable.
var scheme = regexp.MustCompile(`(?i)^(?:bearer|basic|token)\s+`)

// envName is a variable's name, what a field such as bearerTokenEnv holds.
var envName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// plain is a number or a boolean, as a field like maxTokens holds.
var plain = regexp.MustCompile(`^(-?[0-9.]+|true|false|null)$`)

// Redact hides the secrets in text render prints (a diff, a JSON line):
// the value of token (MEMPALACE_REMOTE_TOKEN) wherever it is, and the
// value of every credential field. A reference to a variable (it holds $
// or {env:), a variable's name, a number or a boolean is no secret and
// stays, so render's own entries read as they are written.
func Redact(text, token string) string {
	if token = strings.TrimSpace(token); len(token) >= minRedact {
		text = strings.ReplaceAll(text, token, Redacted)
	}
	return credential.ReplaceAllStringFunc(text, func(m string) string {
		sub := credential.FindStringSubmatch(m)
		key, val := sub[1], strings.TrimRight(sub[2], " \t\r")
		q, inner := "", val
		if len(val) >= 2 && (val[0] == '"' || val[0] == '\'') {
			q, inner = val[:1], val[1:len(val)-1]
		}
		if inner == "" || inner == Redacted || strings.Contains(inner, "$") || strings.Contains(inner, "{env:") ||
			envName.MatchString(inner) || plain.MatchString(inner) {
			return m
		}
		prefix := scheme.FindString(inner)
		if inner[len(prefix):] == Redacted {
			return m
		}
		return key + q + prefix + Redacted + q + sub[2][len(val):]
	})
}
