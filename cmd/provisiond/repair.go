package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/internal/daemon"
)

func repairCommand(e sys) *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "repair [--data-dir DIR]",
		Short: "Repair a stopped daemon's damaged database where bbolt can",
		Long: `Checks a stopped daemon's database as check does and repairs the one damage
bbolt can repair in place: a damaged copy of its meta page (bbolt keeps two,
written alternately, and opens with the newer valid one). One empty commit
writes the damaged copy again; the file as it was is kept beside it as
provisiond.db.damaged. Damage in other pages cannot be repaired in place:
restore the last backup (provisiond restore ARCHIVE --data-dir DIR --force).
Exit status 1 when the database could not be repaired.`,
		Example: `  provisiond repair --data-dir /var/lib/provisiond`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			path := filepath.Join(dataDir, daemon.DBFile)
			rep := checkDataDir(ctx, path)
			switch {
			case rep.OK:
				fmt.Fprintln(e.stdout, "consistency check: ok; nothing to repair")
				return nil
			case !rep.Damaged:
				return errors.New(rep.Error)
			case rep.DamagedMetaPage == nil:
				return fmt.Errorf("%s\nbbolt cannot repair this in place: restore the last backup (provisiond restore ARCHIVE --data-dir %s --force); the damaged file is left as it was", rep.Error, dataDir)
			}
			fmt.Fprintln(e.stdout, rep.Error)
			kept := path + ".damaged"
			if err := copyFile(path, kept); err != nil {
				return fmt.Errorf("cannot keep a copy of the damaged file: %w (nothing was changed)", err)
			}
			after := checkInChild(ctx, path, "--rewrite-meta")
			if !after.OK {
				return fmt.Errorf("the repair did not work: %s; the file as it was is %s", after.Error, kept)
			}
			fmt.Fprintf(e.stdout, "meta page %d rewritten; consistency check: ok (revision %d); the file as it was is %s\n", *rep.DamagedMetaPage, after.Revision, kept)
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", dataDirFromEnv(e.getenv), "data dir whose database to repair, not one a daemon is running on ($PROVISIOND_DATA_DIR)")
	return cmd
}

// copyFile copies src to a new file dst (mode 0600), synced.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
	}
	return err
}

// checkBeforeOpen is serve's check of its bbolt database before the daemon
// opens it: a damaged file is refused (bbolt would crash on it, at the open
// or later, on a page it had not read yet). A damaged meta page copy with
// every other page sound is only a warning: bbolt opens with the other
// copy and the open's first commit writes it again. What is not damage
// (a database locked by a running daemon, a newer schema) is left to
// daemon.Start to report. A refusal exits with exitDataDir.
func checkBeforeOpen(cfg daemon.Config, log *slog.Logger) error {
	if cfg.Store != "" && cfg.Store != daemon.StoreBolt {
		return nil
	}
	path := filepath.Join(cfg.DataDir, daemon.DBFile)
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		return nil
	}
	rep := checkInChild(context.Background(), path)
	switch {
	case !rep.Damaged:
		return nil
	case rep.DamagedMetaPage != nil && rep.PagesChecked:
		log.Warn("the database had a damaged meta page; bbolt opens with the other copy and rewrites it", "path", path, "damage", rep.Error)
		return nil
	}
	log.Error("cannot start: the database is damaged; it was not opened", "path", path, "err", rep.Error,
		"next", fmt.Sprintf("provisiond check --data-dir %s says more; provisiond repair --data-dir %s repairs a damaged meta page; other damage needs the last backup restored (provisiond restore)", cfg.DataDir, cfg.DataDir))
	return exitCode(exitDataDir) // restarting will not help
}
