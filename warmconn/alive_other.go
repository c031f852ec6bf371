//go:build !unix

package warmconn

import "net"

// alive cannot peek here; a closed connection is caught by the retry.
func alive(net.Conn, bool) bool { return true }
