package main

import (
	"bytes"
	"io"
	"strings"
	"text/tabwriter"
)

// table is the tabwriter of the CLI's tables: Flush writes each line
// without the padding a tabwriter leaves after the last non-empty cell
// when the cells behind it are empty (a device with no token yet).
type table struct {
	*tabwriter.Writer
	buf bytes.Buffer
	out io.Writer
}

func newTable(out io.Writer) *table {
	t := &table{out: out}
	t.Writer = tabwriter.NewWriter(&t.buf, 0, 2, 2, ' ', 0)
	return t
}

// Flush writes the table to its output, each line's trailing spaces cut.
func (t *table) Flush() error {
	if err := t.Writer.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	for line := range strings.Lines(t.buf.String()) {
		b.WriteString(strings.TrimRight(line, " \n") + "\n")
	}
	t.buf.Reset()
	_, err := io.WriteString(t.out, b.String())
	return err
}
