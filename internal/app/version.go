package app

import (
	"runtime/debug"
	"strings"
)

// Version says which build this is: the module version and the VCS revision the binary was built from, as the Go
// toolchain recorded them ("(devel)" and no revision for a `go run` outside a checkout).
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	var revision, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	// A version derived from the VCS (v0.0.0-<time>-<revision>) names the revision already.
	if revision != "" && !strings.Contains(v, revision[:min(12, len(revision))]) {
		v += " " + revision + modified
	}
	return v
}
