// Package confpos gives a mistake in a file a user edits the form
// FILE:LINE:COLUMN: what (fix: how): the .env files render and doctor
// read, the JSON(C) files the gateway and the edge read, and the harness
// configs render edits (JSON, JSONC, TOML, YAML). The parsers
// underneath (godotenv, hujson, encoding/json) say what is wrong, but not
// always where or what to do about it; this package finds the place
// without parsing the file a second way.
package confpos
