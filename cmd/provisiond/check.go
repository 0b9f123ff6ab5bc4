package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/state"
)

// checkReport is what check prints with --format json.
type checkReport struct {
	Path          string         `json:"path"`
	OK            bool           `json:"ok"`
	Error         string         `json:"error,omitempty"`
	SchemaVersion uint64         `json:"schema-version,omitempty"`
	Revision      uint64         `json:"revision"`
	Size          int64          `json:"size,omitempty"`
	Records       map[string]int `json:"records,omitempty"`
}

// check: provisiond check [--data-dir DIR] [--format text|json]
func check(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("provisiond check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", defaultDataDir(os.Getenv), "data dir whose database to check (not one a daemon is running on)")
	format := fs.String("format", "text", "output format: text or json")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: provisiond check [--data-dir DIR] [--format text|json]\n\n"+
			"Opens a stopped daemon's database read-only, runs bbolt's consistency check over every\n"+
			"page and prints the schema version, revision and record counts. Exit status 1 when the\n"+
			"file cannot be opened or the check finds a problem. Example:\n\n"+
			"  provisiond check --data-dir /var/lib/provisiond\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitFlags(err)
	}
	if fs.NArg() > 0 || (*format != "text" && *format != "json") {
		fs.Usage()
		return 2
	}
	rep := checkDataDir(filepath.Join(*dataDir, daemon.DBFile))
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		printCheck(stdout, stderr, rep)
	}
	if !rep.OK {
		return 1
	}
	return 0
}

func checkDataDir(path string) checkReport {
	rep := checkReport{Path: path}
	st, err := state.OpenReadOnly(path)
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	defer st.Close()
	stats, err := st.Stats()
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	rep.SchemaVersion, rep.Revision, rep.Size, rep.Records = stats.SchemaVersion, stats.Revision, stats.Size, stats.Records
	if err := st.Check(); err != nil {
		rep.Error = err.Error()
		return rep
	}
	rep.OK = true
	return rep
}

func printCheck(stdout, stderr io.Writer, rep checkReport) {
	if rep.SchemaVersion != 0 {
		fmt.Fprintf(stdout, "%s: schema version %d, revision %d, %s\n", rep.Path, rep.SchemaVersion, rep.Revision, size(rep.Size))
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(rep.Records)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, rep.Records[k]))
		}
		fmt.Fprintf(stdout, "records: %s\n", strings.Join(parts, ", "))
	}
	if rep.OK {
		fmt.Fprintln(stdout, "consistency check: ok")
		return
	}
	fmt.Fprintf(stderr, "provisiond check: %s\n", rep.Error)
}

func size(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return mib(n)
}
