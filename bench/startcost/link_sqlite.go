//go:build sqlite

package main

import _ "modernc.org/sqlite"
