package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"filippo.io/age"
	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/internal/backup"
	"github.com/provisiond/provisiond/internal/controllerstore"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/progress"
)

func backupCommand(e sys) *cobra.Command {
	var output, credsFile, dataDir string
	var keys archiveKeys
	cmd := &cobra.Command{
		Use:   "backup --output FILE|- [--credentials FILE | --data-dir DIR] [--encrypt | --recipient KEY]",
		Short: "Snapshot a running daemon into an archive",
		Long: `Takes a consistent snapshot of a running daemon's database, with its
credentials and TLS material, as a tar archive. The daemon is found through
credentials.yaml: --credentials FILE, $PROVISIOND_CREDENTIALS, or the one in
--data-dir ($PROVISIOND_DATA_DIR, else the default data dir). The archive
is written to FILE.partial (mode 0600), synced, then renamed; "--output -"
writes it to stdout (never to a terminal).

The archive holds secrets in plain text: credentials.yaml (the admin's and
the controller agent's passwords) and the CA's private key (ca.key). Keep
it where only the operator can read it, or encrypt it (age): --encrypt asks
for a passphrase (or reads --passphrase-file), --recipient age1... encrypts
to a public key, so the host taking backups holds no secret. restore
recognises an encrypted archive and decrypts it.`,
		Example: `  provisiond backup --output provisiond-backup.tar
  provisiond backup --data-dir /var/lib/provisiond --output /srv/backups/provisiond.tar
  provisiond backup --output - | ssh backup-host 'cat > provisiond.tar'
  provisiond backup --encrypt --passphrase-file /etc/provisiond/backup-passphrase --output provisiond.tar.age
  provisiond backup --recipient age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p --output provisiond.tar.age`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == "" {
				return usagef("backup needs --output FILE")
			}
			path := credsFile
			if path == "" {
				path = filepath.Join(dataDir, daemon.CredentialsFile)
			}
			recipients, err := keys.recipientsFor()
			if err != nil {
				return err
			}
			return runBackup(cmd.Context(), e, path, output, recipients)
		},
	}
	keys.backupFlags(cmd.Flags(), e)
	cmd.Flags().StringVar(&output, "output", "", `file to write the backup archive to, "-" for stdout (required)`)
	cmd.Flags().StringVar(&credsFile, "credentials", e.getenv("PROVISIOND_CREDENTIALS"), "credentials.yaml of the daemon (default: the one in --data-dir)")
	cmd.Flags().StringVar(&dataDir, "data-dir", dataDirFromEnv(e.getenv), "data dir of the running daemon, to find credentials.yaml ($PROVISIOND_DATA_DIR)")
	return cmd
}

// dataDirFromEnv is the default --data-dir of the verbs that find a data
// dir: $PROVISIOND_DATA_DIR (as for serve), else the default data dir.
func dataDirFromEnv(getenv func(string) string) string {
	if d := getenv(envName("data-dir")); d != "" {
		return d
	}
	return defaultDataDir(getenv)
}

func runBackup(ctx context.Context, e sys, credsPath, output string, recipients []age.Recipient) error {
	creds, err := daemon.ReadCredentials(credsPath)
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if output == "-" {
		if progress.IsTerminal(e.stdout) {
			return errors.New("refusing to write a tar archive to a terminal: redirect stdout, or give --output FILE")
		}
		w, err := encryptTo(e.stdout, recipients)
		if err != nil {
			return err
		}
		if err := backup.Fetch(ctx, creds, w, func(int64, int64) {}); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		fmt.Fprintln(e.stderr, "backup written to stdout")
		return nil
	}
	tmp := output + ".partial"
	_ = os.Remove(tmp) // a leftover keeps its mode; a new file is 0600
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	bar := progress.New(e.stderr, "backup")
	w, err := encryptTo(f, recipients)
	if err == nil {
		err = backup.Fetch(ctx, creds, w, bar.Update)
	}
	bar.Done()
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, output)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if len(recipients) > 0 {
		fmt.Fprintf(e.stderr, "backup written to %s (encrypted)\n", output)
		return nil
	}
	fmt.Fprintf(e.stderr, "backup written to %s (it holds the admin password and the CA key: keep it private, or use --encrypt)\n", output)
	return nil
}

func restoreCommand(e sys) *cobra.Command {
	var dataDir, to string
	var force, allowUnverified bool
	var keys archiveKeys
	var ef etcdFlags
	cmd := &cobra.Command{
		Use:   "restore FILE --data-dir DIR [--force] [--allow-unverified] [--passphrase-file FILE | --identity FILE] | FILE --to etcd --etcd-endpoints URLS",
		Short: "Unpack a backup archive into a data dir",
		Long: `Unpacks a backup into a data dir the daemon can start from. A data dir a daemon
is running on is refused, and one that already holds a database unless
--force. The archive is unpacked and its database checked in a temporary
directory first; only then are the files moved into place. An archive
encrypted by backup (--encrypt or --recipient) is decrypted on the way:
its passphrase from --passphrase-file or asked on the terminal, or its
private key from --identity.

Every archive carries a manifest: the SHA-256 of each of its files, the
database's revision and record counts, and the manifest's own digest. Each
is verified; an archive damaged or changed after it was made (a changed
byte, a file missing or added, cut short) is refused, and nothing is
restored. An archive without a manifest (made by an earlier provisiond) is
refused unless --allow-unverified. provisiond check --archive verifies an
archive without restoring it.

With --to etcd the archive (of a daemon on either store) is loaded into an
empty etcd prefix instead, as provisiond migrate loads a data dir (the
etcd flags are migrate's); daemons started there serve the controller.`,
		Example: `  provisiond restore provisiond-2026-11-30.tar --data-dir /var/lib/provisiond
  provisiond restore provisiond.tar --to etcd --etcd-endpoints https://h1:2379,https://h2:2379,https://h3:2379
  provisiond restore provisiond.tar.age --passphrase-file /etc/provisiond/backup-passphrase --data-dir /var/lib/provisiond`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("restore needs one argument (the archive), got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case to != daemon.StoreBolt && to != daemon.StoreEtcd:
				return usagef("--to %q: want %s or %s", to, daemon.StoreBolt, daemon.StoreEtcd)
			case to == daemon.StoreEtcd && (dataDir != "" || force):
				return usagef("restore --to etcd loads an empty etcd prefix: --data-dir and --force are for a data dir")
			case to == daemon.StoreEtcd && ef.endpoints == "":
				return usagef("restore --to etcd needs --etcd-endpoints")
			case to == daemon.StoreBolt && cmd.Flags().Changed("etcd-endpoints"):
				return usagef("--etcd-endpoints needs --to etcd")
			case to == daemon.StoreBolt && dataDir == "":
				return usagef("restore needs --data-dir DIR")
			}
			file := args[0]
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			defer f.Close()
			archive, err := keys.openArchive(f)
			if err != nil {
				return err
			}
			if to == daemon.StoreEtcd {
				return restoreToEtcd(cmd.Context(), e, archive, file, &ef, allowUnverified)
			}
			made := controllerstore.MissingDirs(dataDir)
			if err := backup.Restore(archive, dataDir, backup.RestoreOptions{Force: force, AllowUnverified: allowUnverified}); err != nil {
				// Leave no half-made data dir: remove the directories
				// restore made (deepest first; os.Remove keeps any that
				// are not empty).
				for _, d := range made {
					_ = os.Remove(d)
				}
				return err
			}
			fmt.Fprintf(e.stderr, "restored %s into %s; start it with: provisiond serve --data-dir %s\n", file, dataDir, dataDir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "data dir to restore into (required; must not be in use)")
	cmd.Flags().BoolVar(&force, "force", false, "replace a database already in the data dir (never a live one)")
	cmd.Flags().BoolVar(&allowUnverified, "allow-unverified", false, "restore an archive that carries no manifest (made by an earlier provisiond) without verifying it")
	cmd.Flags().StringVar(&to, "to", daemon.StoreBolt, "restore into: bbolt (--data-dir) or etcd (an empty prefix)")
	ef.bind(cmd.Flags(), e.getenv)
	keys.restoreFlags(cmd.Flags(), e)
	return cmd
}
