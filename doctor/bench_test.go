package doctor

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkRunSolitary is doctor on a solitary devbox with a converged
// palace: every local check, no network.
func BenchmarkRunSolitary(b *testing.B) {
	home := b.TempDir()
	bx := &box{home: home, palace: filepath.Join(home, ".mempalace", "palace"), env: map[string]string{}}
	bx.opts = Options{Home: home, HomeFromFlag: true,
		Env:      func(k string) (string, bool) { v, ok := bx.env[k]; return v, ok },
		LookPath: func(string) (string, error) { return "/usr/bin/mempalace-mcp", nil }}
	for b.Loop() {
		if fs := Run(context.Background(), bx.opts); len(fs) != 0 {
			b.Fatal(fs)
		}
	}
}
