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
	"time"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/internal/backup"
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
	// Archive is what check --archive found of the archive itself.
	Archive *archiveReport `json:"archive,omitempty"`
}

// archiveReport is check --archive's report of an archive.
type archiveReport struct {
	File string `json:"file"`
	// Verified says the archive matched its manifest; Manifest is the
	// manifest (nil for an archive without one, --allow-unverified).
	Verified bool             `json:"verified"`
	Manifest *backup.Manifest `json:"manifest,omitempty"`
}

func checkCommand(e sys) *cobra.Command {
	var dataDir, format, archive string
	var allowUnverified bool
	var keys archiveKeys
	cmd := &cobra.Command{
		Use:   "check [--data-dir DIR | --archive FILE] [--format text|json]",
		Short: "Check a stopped daemon's database, or a backup archive, read-only",
		Long: `Opens a stopped daemon's database read-only, runs bbolt's consistency check over
every page and prints the schema version, revision and record counts. A data
dir a daemon is running on is refused. Exit status 1 when the file cannot be
opened or the check finds a problem.

The check runs in a child process, so a damaged file (on which bbolt would
crash) is reported as damaged, with what bbolt found. One damaged copy of
bbolt's meta page is fixed by provisiond repair; other damage by restoring
a backup.

With --archive FILE it checks a backup archive instead, as restore would
before restoring it: every file against the archive's manifest (SHA-256 and
size), the manifest against its digest, then the archived database's pages,
and its revision and record counts against the manifest's. An archive
damaged or changed after it was made fails. An encrypted archive is
decrypted on the way (--passphrase-file or the terminal, or --identity); one
without a manifest (made by an earlier provisiond) fails unless
--allow-unverified.`,
		Example: `  provisiond check --data-dir /var/lib/provisiond
  provisiond check --format json
  provisiond check --archive provisiond-backup.tar`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return usagef("--format %q: want text or json", format)
			}
			if archive == "" && (allowUnverified || keys.identityFile != "" || cmd.Flags().Changed("passphrase-file")) {
				return usagef("--allow-unverified, --passphrase-file and --identity are for --archive")
			}
			if archive != "" && cmd.Flags().Changed("data-dir") {
				return usagef("--archive and --data-dir do not go together: check one or the other")
			}
			var rep checkReport
			if archive != "" {
				rep = checkArchive(cmd.Context(), archive, &keys, allowUnverified)
			} else {
				rep = checkDataDir(cmd.Context(), filepath.Join(dataDir, daemon.DBFile))
			}
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
	cmd.Flags().StringVar(&archive, "archive", "", "check this backup archive instead of a data dir")
	cmd.Flags().BoolVar(&allowUnverified, "allow-unverified", false, "with --archive: check an archive that carries no manifest (made by an earlier provisiond)")
	keys.restoreFlags(cmd.Flags(), e)
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

// checkArchive verifies a backup archive and checks its database (in a
// temporary directory, removed after): the report of the database, with
// the archive's.
func checkArchive(ctx context.Context, file string, keys *archiveKeys, allowUnverified bool) checkReport {
	if ctx == nil {
		ctx = context.Background()
	}
	ar := &archiveReport{File: file}
	fail := func(err error) checkReport {
		return checkReport{Path: file, Error: err.Error(), Archive: ar}
	}
	f, err := os.Open(file)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	r, err := keys.openArchive(f)
	if err != nil {
		return fail(err)
	}
	tmp, err := os.MkdirTemp("", "provisiond-check-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	m, names, err := backup.UnpackArchive(r, tmp, allowUnverified)
	ar.Manifest = m
	if err != nil {
		return fail(err)
	}
	if !slices.Contains(names, daemon.DBFile) {
		return fail(fmt.Errorf("the archive holds no %s", daemon.DBFile))
	}
	ar.Verified = m != nil
	rep := checkInChild(ctx, filepath.Join(tmp, daemon.DBFile))
	rep.Path, rep.Archive = file+": "+daemon.DBFile, ar
	if rep.OK && m != nil {
		if err := m.CheckStats(rep.SchemaVersion, rep.Revision, rep.Records); err != nil {
			rep.OK, rep.Error = false, fmt.Errorf("%w: %w", backup.ErrTampered, err).Error()
		}
	}
	return rep
}

func printCheck(stdout io.Writer, rep checkReport) {
	if a := rep.Archive; a != nil {
		switch m := a.Manifest; {
		case a.Verified:
			fmt.Fprintf(stdout, "archive %s: controller %s (%s), made %s by provisiond %s; %d files match the manifest and its digest\n",
				a.File, m.Controller, m.Store, m.Created.Format(time.RFC3339), m.Version, len(m.Files))
		case m == nil && rep.Error == "":
			fmt.Fprintf(stdout, "archive %s: no manifest: not verified (--allow-unverified)\n", a.File)
		}
	}
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
