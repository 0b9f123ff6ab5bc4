package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/progress"
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
	// Damaged says the file's pages are damaged (not: missing, locked,
	// of a newer schema); DamagedMetaPage names the one damaged copy of
	// bbolt's meta page, when the rest is sound (repair rewrites it).
	Damaged         bool `json:"damaged,omitempty"`
	DamagedMetaPage *int `json:"damaged-meta-page,omitempty"`
	// PagesChecked says bbolt's check walked every page and found
	// nothing (besides a damaged meta page copy).
	PagesChecked bool `json:"pages-checked"`
}

func checkCommand(e sys) *cobra.Command {
	var dataDir, format string
	cmd := &cobra.Command{
		Use:   "check [--data-dir DIR] [--format text|json]",
		Short: "Check a stopped daemon's database read-only",
		Long: `Opens a stopped daemon's database read-only, runs bbolt's consistency check over
every page and prints the schema version, revision and record counts. A data
dir a daemon is running on is refused. Exit status 1 when the file cannot be
opened or the check finds a problem.

The check runs in a child process, so a damaged file (on which bbolt would
crash) is reported as damaged, with what bbolt found. One damaged copy of
bbolt's meta page is fixed by provisiond repair; other damage by restoring
a backup.`,
		Example: `  provisiond check --data-dir /var/lib/provisiond
  provisiond check --format json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return usagef("--format %q: want text or json", format)
			}
			rep := checkDataDir(cmd.Context(), filepath.Join(dataDir, daemon.DBFile))
			if format == "json" {
				enc := json.NewEncoder(e.stdout)
				enc.SetIndent("", "  ")
				_ = enc.Encode(rep)
			} else {
				printCheck(e.stdout, rep)
			}
			if !rep.OK {
				return errors.New(rep.Error)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", dataDirFromEnv(e.getenv), "data dir whose database to check, not one a daemon is running on ($PROVISIOND_DATA_DIR)")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// checkDataDir checks the database at path in a child process (see
// dbcheck.go).
func checkDataDir(ctx context.Context, path string) checkReport {
	if ctx == nil {
		ctx = context.Background()
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return checkReport{Path: path, Error: fmt.Sprintf("no database at %s: is --data-dir (or $PROVISIOND_DATA_DIR) right?", path)}
	}
	return checkInChild(ctx, path)
}

func printCheck(stdout io.Writer, rep checkReport) {
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
	}
}

func size(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return progress.MiB(n)
}
