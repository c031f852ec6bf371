//go:build nethttp

package main

import _ "net/http"
