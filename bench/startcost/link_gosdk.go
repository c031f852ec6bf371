//go:build gosdk

package main

import _ "github.com/modelcontextprotocol/go-sdk/mcp"
