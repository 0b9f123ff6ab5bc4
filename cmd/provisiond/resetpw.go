package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/internal/daemon"
)

func resetAdminPasswordCommand(e sys) *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "reset-admin-password --data-dir DIR",
		Short: "Give the admin user a new password (the daemon must be stopped)",
		Long: `Gives the admin user of a stopped daemon's data dir a new random password and
writes it into the dir's credentials.yaml (mode 0600). When credentials.yaml is
missing it is made again from the database and ca.crt (the controller agent
gets a new password too). The password is not printed: read it from the file.

A data dir a daemon is running on is refused. Exit status 1 on any failure.`,
		Example: `  sudo systemctl stop provisiond
  sudo -u provisiond provisiond reset-admin-password --data-dir /var/lib/provisiond
  sudo systemctl start provisiond`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			path, err := daemon.ResetAdminPassword(dataDir)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "New admin password written to %s.\n", path)
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir(e.getenv), "data dir of the stopped daemon")
	return cmd
}
