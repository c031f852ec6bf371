package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Dockerfile.test cannot be built here (no Docker engine), so it must not
// drift from what is run here: after its "# The steps of scripts/test" line
// its RUN commands are exactly scripts/test's commands, in order, and every
// variable scripts/test exports is set by an ENV. Its progress ticker (a
// background line and the trap that stops it) is not a step.
func TestDockerfileRunsTheTestScript(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	script, err := os.ReadFile(filepath.Join(root, "scripts", "test"))
	if err != nil {
		t.Fatal(err)
	}
	docker, err := os.ReadFile(filepath.Join(root, "Dockerfile.test"))
	if err != nil {
		t.Fatal(err)
	}
	var steps, exports []string
	for _, l := range strings.Split(string(script), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "", strings.HasPrefix(l, "#"), strings.HasPrefix(l, "set "), strings.HasPrefix(l, "cd "), strings.HasPrefix(l, "echo "):
		case strings.HasPrefix(l, "trap "), strings.HasSuffix(l, " &"):
			// the progress ticker and its clean-up: output, not a step
			// (docker build prints its own progress)
		case strings.HasPrefix(l, "export "):
			name, _, _ := strings.Cut(strings.TrimPrefix(l, "export "), "=")
			exports = append(exports, name)
		default:
			steps = append(steps, strings.ReplaceAll(l, ` "$@"`, ""))
		}
	}
	var runs, envs []string
	marked := false
	text := strings.ReplaceAll(string(docker), "\\\n", " ")
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "# The steps of scripts/test, in order:" {
			marked = true
		}
		if strings.HasPrefix(l, "ENV ") {
			for _, kv := range strings.Fields(strings.TrimPrefix(l, "ENV ")) {
				name, _, _ := strings.Cut(kv, "=")
				envs = append(envs, name)
			}
		}
		if marked && strings.HasPrefix(l, "RUN ") {
			runs = append(runs, strings.TrimPrefix(l, "RUN "))
		}
	}
	if !marked {
		t.Fatal("Dockerfile.test has no '# The steps of scripts/test, in order:' line")
	}
	if len(steps) == 0 || !reflect.DeepEqual(steps, runs) {
		t.Fatalf("Dockerfile.test runs\n  %s\nbut scripts/test runs\n  %s", strings.Join(runs, "\n  "), strings.Join(steps, "\n  "))
	}
	for _, e := range exports {
		found := false
		for _, x := range envs {
			found = found || x == e
		}
		if !found {
			t.Errorf("scripts/test exports %s; Dockerfile.test sets no ENV %s", e, e)
		}
	}
	if !strings.Contains(string(docker), "RUN scripts/build ") {
		t.Error("Dockerfile.test does not build the binary with scripts/build")
	}
}
