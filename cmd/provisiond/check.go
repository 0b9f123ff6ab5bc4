package main

import (
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

func checkCommand(e sys) *cobra.Command {
	var dataDir, format string
	cmd := &cobra.Command{
		Use:   "check [--data-dir DIR] [--format text|json]",
		Short: "Check a stopped daemon's database read-only",
		Long: `Opens a stopped daemon's database read-only, runs bbolt's consistency check over
every page and prints the schema version, revision and record counts. A data
dir a daemon is running on is refused. Exit status 1 when the file cannot be
opened or the check finds a problem.`,
		Example: `  provisiond check --data-dir /var/lib/provisiond
  provisiond check --format json`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			if format != "text" && format != "json" {
				return usagef("--format %q: want text or json", format)
			}
			rep := checkDataDir(filepath.Join(dataDir, daemon.DBFile))
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

func checkDataDir(path string) checkReport {
	rep := checkReport{Path: path}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		rep.Error = fmt.Sprintf("no database at %s: is --data-dir (or $PROVISIOND_DATA_DIR) right?", path)
		return rep
	}
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
