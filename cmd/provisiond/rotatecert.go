package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/internal/daemon"
)

func rotateCertCommand(e sys) *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "rotate-cert [--data-dir DIR]",
		Short: "Renew the server certificate with the same CA",
		Long: `Issue a new server certificate for the same names (juju-apiserver, localhost,
the listen addresses) from the CA in the data dir, and write it in place of
the old one. Agents keep trusting the daemon: they trust the CA, which does
not change. A running daemon serves the new certificate once reloaded
(SIGHUP: systemctl reload provisiond); a stopped one at its next start.

The daemon warns a month before its certificate expires, and exports the
expiry as provisiond_tls_certificate_expiry_timestamp_seconds. An
operator-supplied certificate (--cert-file) is renewed by the operator:
replace the file and reload.`,
		Example: `  provisiond rotate-cert --data-dir /var/lib/provisiond && systemctl reload provisiond`,
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			notAfter, err := daemon.RotateCertificate(dataDir)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "renewed the server certificate in %s (same CA; expires %s); reload the daemon (SIGHUP) to serve it\n",
				dataDir, notAfter.UTC().Format(time.RFC3339))
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", dataDirFromEnv(e.getenv), "data dir whose certificate to renew ($PROVISIOND_DATA_DIR)")
	return cmd
}
