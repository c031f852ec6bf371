// Command hello is the smallest Go program that prints a line: the floor a
// Go binary's start cannot go below, measured beside render's no-change
// start (bench/render-start.sh).
package main

import "os"

func main() { os.Stdout.WriteString("hello\n") }
