// Package buildinfo says which build of provisiond is running: the
// version (set at link time, see Version), the VCS revision and the Go
// version (from the binary's build information). provisiond and
// provisionctl print it, the daemon reports it to operators
// (ModelAdmin.ControllerInfo) and exports it as provisiond_build_info.
//
// A leaf: it imports nothing of the module.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Version is provisiond's release version, set at build time with
//
//	go build -ldflags "-X github.com/provisiond/provisiond/internal/buildinfo.Version=1.2.3"
var Version = "0.1.0-dev"

// Info describes a build.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"` // VCS revision, "" when not stamped; "+dirty" when modified
	GoVersion string `json:"go-version"`
}

var (
	once sync.Once
	info Info
)

// Get returns the running binary's build information.
func Get() Info {
	once.Do(func() {
		info = Info{Version: Version, GoVersion: runtime.Version()}
		bi, ok := debug.ReadBuildInfo()
		if !ok {
			return
		}
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && info.Revision != "" {
			info.Revision += "+dirty"
		}
	})
	return info
}

// String is "VERSION (REVISION, GOVERSION)", or without the revision when
// the binary has none.
func (i Info) String() string {
	if i.Revision == "" {
		return i.Version + " (" + i.GoVersion + ")"
	}
	return i.Version + " (" + shortRevision(i.Revision) + ", " + i.GoVersion + ")"
}

// shortRevision keeps the first 12 characters of a revision and its
// "+dirty" mark.
func shortRevision(r string) string {
	const mark = "+dirty"
	dirty := len(r) > len(mark) && r[len(r)-len(mark):] == mark
	if dirty {
		r = r[:len(r)-len(mark)]
	}
	if len(r) > 12 {
		r = r[:12]
	}
	if dirty {
		r += mark
	}
	return r
}
