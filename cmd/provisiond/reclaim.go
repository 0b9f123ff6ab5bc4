package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/progress"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

func reclaimEtcdSpaceCommand(e sys) *cobra.Command {
	var ef etcdFlags
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "reclaim-etcd-space --etcd-endpoints URLS",
		Short: "Free etcd's space after its quota was reached (NOSPACE), or before",
		Long: `Gives an etcd cluster room for writes again once its database reached etcd's
space quota (--quota-backend-bytes): etcd then raises its NOSPACE alarm and
refuses every write, and the daemons answer writes with code "quota limit
exceeded" and /health with 503 "store out of space".

It compacts etcd's history to the current revision, defragments each member
in turn (the leader last; a member answers nothing while it defragments,
seconds per GiB), and, if every member's database is then below its quota,
disarms the NOSPACE alarm. If a member's database is still over its quota
the data itself needs more room: restart the members with a larger
--quota-backend-bytes and run this again. The daemons may keep running.

It needs every member to answer, and etcd's root role when etcd's auth is
enabled. The etcd flags are serve's, and read $PROVISIOND_ETCD_* as serve
does. Exit status 1 when the space could not be freed.`,
		Example: `  provisiond reclaim-etcd-space --etcd-endpoints https://h1:2379,https://h2:2379,https://h3:2379 \
      --etcd-ca-file etcd-ca.crt --etcd-cert-file root.crt --etcd-key-file root.key`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	ef.bindCluster(fs, e.getenv)
	fs.DurationVar(&timeout, "timeout", 30*time.Minute, "how long it may take in all (defragmenting a large database takes minutes)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg := daemon.EtcdConfig{
			Endpoints: splitList(ef.endpoints), CAFile: ef.caFile, CertFile: ef.certFile, KeyFile: ef.keyFile,
			Username: ef.username, Password: ef.password, DialTimeout: ef.dialTimeout,
		}
		if len(cfg.Endpoints) == 0 {
			return usagef("--etcd-endpoints is required")
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		rep, err := daemon.ReclaimEtcdSpace(ctx, cfg, nil)
		printSpace(e.stderr, rep)
		if err != nil {
			return err
		}
		if len(rep.Full) > 0 {
			return fmt.Errorf("the database of %s is still at or over its quota after compaction and defragmentation: the data needs more room; restart the members with a larger --quota-backend-bytes and run this again (the NOSPACE alarm stays raised meanwhile)",
				strings.Join(rep.Full, ", "))
		}
		return nil
	}
	return cmd
}

// printSpace says what reclaim-etcd-space found and did.
func printSpace(w io.Writer, rep etcdstore.SpaceReport) {
	for i, m := range rep.Before {
		line := fmt.Sprintf("etcd member %s: database %s (%s in use) of a %s quota", m.Endpoint,
			progress.MiB(m.DBSize), progress.MiB(m.DBSizeInUse), progress.MiB(m.DBQuota))
		if i < len(rep.After) {
			line += fmt.Sprintf(", now %s", progress.MiB(rep.After[i].DBSize))
		}
		fmt.Fprintln(w, line)
	}
	if rep.Compacted > 0 {
		fmt.Fprintf(w, "compacted etcd's history to revision %d\n", rep.Compacted)
	}
	for _, d := range rep.Disarmed {
		fmt.Fprintf(w, "disarmed the NOSPACE alarm of %s: writes go on\n", d)
	}
	if len(rep.After) > 0 && len(rep.Disarmed) == 0 && len(rep.Full) == 0 {
		fmt.Fprintln(w, "no NOSPACE alarm was raised")
	}
}
