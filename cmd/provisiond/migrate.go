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
	"github.com/spf13/pflag"

	"github.com/provisiond/provisiond/internal/backup"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/migrate"
	"github.com/provisiond/provisiond/internal/progress"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

func migrateCommand(e sys) *cobra.Command {
	var from, to, fromDir, toDir string
	var ef etcdFlags
	cmd := &cobra.Command{
		Use:   "migrate --from-data-dir DIR --to etcd --etcd-endpoints URLS | --from etcd --etcd-endpoints URLS --to-data-dir DIR",
		Short: "Copy a stopped controller between bbolt and etcd",
		Long: `Copies a stopped controller from its bbolt data dir into an empty etcd prefix,
or from an etcd prefix into a new data dir: every record (read at one
revision), the controller's identity (CA and server keys, the admin and
controller-agent passwords: files in a bbolt data dir, a record in etcd) and
the agent binaries of the data dirs given. The target is then read back and
compared with the source. A daemon started on the target serves the same
controller: the same UUIDs, certificate and logins.

Refused: a data dir a running daemon holds, an etcd prefix daemons are
serving, and any target that is not empty. On etcd the records go in
batches within --etcd-max-txn-ops and --etcd-max-request-bytes; daemons
refuse a prefix whose load has not finished, and a load that fails is
removed again.

With --to etcd, --to-data-dir is the data dir of a daemon to run on etcd: it
gets the agent binaries. With --from etcd, --from-data-dir is the data dir
of one of its daemons, whose agent binaries go to the new data dir.

The etcd flags are serve's, and read $PROVISIOND_ETCD_* as serve does.`,
		Example: `  provisiond migrate --from-data-dir /var/lib/provisiond --to etcd \
      --etcd-endpoints https://h1:2379,https://h2:2379,https://h3:2379 \
      --etcd-ca-file etcd-ca.crt --etcd-cert-file provisiond.crt --etcd-key-file provisiond.key \
      --to-data-dir /var/lib/provisiond-a
  provisiond migrate --from etcd --etcd-endpoints http://127.0.0.1:2379 \
      --from-data-dir /var/lib/provisiond-a --to-data-dir /var/lib/provisiond`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&from, "from", daemon.StoreBolt, "the store to copy from: bbolt (--from-data-dir) or etcd")
	fs.StringVar(&to, "to", daemon.StoreBolt, "the store to copy to: bbolt (--to-data-dir) or etcd")
	fs.StringVar(&fromDir, "from-data-dir", "", "the stopped daemon's data dir (bbolt), or an etcd daemon's (its agent binaries)")
	fs.StringVar(&toDir, "to-data-dir", "", "the new data dir (bbolt), or that of a daemon to run on etcd (the agent binaries)")
	ef.bind(fs, e.getenv)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ecfg, err := ef.config()
		if err != nil {
			return usageError{err}
		}
		cfg := migrate.Config{
			From: migrate.End{Store: from, DataDir: fromDir},
			To:   migrate.End{Store: to, DataDir: toDir},
		}
		if from == daemon.StoreEtcd {
			cfg.From.Etcd = ecfg
		}
		if to == daemon.StoreEtcd {
			cfg.To.Etcd = ecfg
		}
		if from != daemon.StoreEtcd && to != daemon.StoreEtcd && fs.Changed("etcd-endpoints") {
			return usagef("--etcd-endpoints needs --from etcd or --to etcd")
		}
		if err := cfg.Validate(); err != nil {
			return usageError{err}
		}
		return runMigrate(cmd.Context(), e, cfg)
	}
	return cmd
}

// etcdFlags are serve's etcd flags, for the verbs that reach etcd without
// serving (migrate, restore --to etcd).
type etcdFlags struct {
	endpoints, prefix, caFile, certFile, keyFile, username, password string
	dialTimeout, requestTimeout                                      time.Duration
	maxTxnOps, maxRequestBytes                                       int
}

func (f *etcdFlags) bind(fs *pflag.FlagSet, getenv func(string) string) {
	def := defaultOptions(getenv)
	f.bindCluster(fs, getenv)
	envString(fs, getenv, &f.prefix, "etcd-prefix", def.EtcdPrefix, "etcd key prefix holding the controller")
	fs.DurationVar(&f.requestTimeout, "etcd-request-timeout", 30*time.Second, "how long one request (a batch of the load) may take")
	fs.IntVar(&f.maxTxnOps, "etcd-max-txn-ops", def.EtcdMaxTxnOps, "the cluster's --max-txn-ops: records per batch of the load")
	fs.IntVar(&f.maxRequestBytes, "etcd-max-request-bytes", def.EtcdMaxRequestBytes, "the cluster's --max-request-bytes: a batch is at most half of it")
}

// bindCluster binds the flags that reach the cluster: its endpoints, TLS,
// auth and dial timeout (reclaim-etcd-space needs no more).
func (f *etcdFlags) bindCluster(fs *pflag.FlagSet, getenv func(string) string) {
	def := defaultOptions(getenv)
	envString(fs, getenv, &f.endpoints, "etcd-endpoints", "", "etcd client URLs, comma-separated")
	envString(fs, getenv, &f.caFile, "etcd-ca-file", "", "CA certificate PEM etcd's certificate chains to")
	envString(fs, getenv, &f.certFile, "etcd-cert-file", "", "client certificate PEM for etcd's --client-cert-auth")
	envString(fs, getenv, &f.keyFile, "etcd-key-file", "", "client key PEM, with --etcd-cert-file")
	envString(fs, getenv, &f.username, "etcd-username", "", "etcd auth user")
	envString(fs, getenv, &f.password, "etcd-password", "", "etcd auth password (prefer $PROVISIOND_ETCD_PASSWORD: a flag shows in ps)")
	fs.DurationVar(&f.dialTimeout, "etcd-dial-timeout", def.EtcdDialTimeout, "how long to wait for etcd")
}

// envString binds a string flag whose default $PROVISIOND_<NAME> overrides.
func envString(fs *pflag.FlagSet, getenv func(string) string, p *string, name, dflt, usage string) {
	if v := getenv(envName(name)); v != "" {
		dflt = v
	}
	fs.StringVar(p, name, dflt, usage)
}

// config is the etcd configuration of the flags, with the environment's
// durations and limits (flags win).
func (f *etcdFlags) config() (daemon.EtcdConfig, error) {
	if f.maxTxnOps < 8 {
		return daemon.EtcdConfig{}, fmt.Errorf("--etcd-max-txn-ops %d: at least 8", f.maxTxnOps)
	}
	if f.maxRequestBytes < 4096 {
		return daemon.EtcdConfig{}, fmt.Errorf("--etcd-max-request-bytes %d: at least 4096", f.maxRequestBytes)
	}
	return daemon.EtcdConfig{
		Endpoints:       splitList(f.endpoints),
		Prefix:          f.prefix,
		CAFile:          f.caFile,
		CertFile:        f.certFile,
		KeyFile:         f.keyFile,
		Username:        f.username,
		Password:        f.password,
		DialTimeout:     f.dialTimeout,
		RequestTimeout:  f.requestTimeout,
		MaxTxnOps:       f.maxTxnOps,
		MaxRequestBytes: f.maxRequestBytes,
	}, nil
}

func runMigrate(ctx context.Context, e sys, cfg migrate.Config) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg.Progress = migrateProgress(e.stderr)
	res, err := migrate.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "migrated controller %s from %s to %s: %d records (source revision %d, target revision %d), copied in %s, verified in %s\n",
		res.Controller, describeEnd(cfg.From), describeEnd(cfg.To), res.Records, res.SourceRevision, res.TargetRevision,
		res.Copy.Round(time.Millisecond), res.Verify.Round(time.Millisecond))
	if res.AgentBinaries > 0 {
		fmt.Fprintf(e.stderr, "copied %d agent binaries (%s) to %s\n", res.AgentBinaries, progress.MiB(res.AgentBinaryBytes), cfg.To.DataDir)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(e.stderr, "note: %s\n", n)
	}
	fmt.Fprintf(e.stderr, "start it with: %s\n", serveLine(cfg.To))
	return nil
}

// describeEnd names one side of a migration for people.
func describeEnd(end migrate.End) string {
	if end.Store == daemon.StoreEtcd {
		return fmt.Sprintf("etcd %s prefix %s", strings.Join(end.Etcd.Endpoints, ","), prefixOf(end.Etcd))
	}
	return "bbolt " + end.DataDir
}

func prefixOf(e daemon.EtcdConfig) string {
	if e.Prefix == "" {
		return etcdstore.DefaultPrefix
	}
	return e.Prefix
}

// serveLine is the serve command line of the target (without the etcd
// credentials, which the operator has).
func serveLine(end migrate.End) string {
	if end.Store != daemon.StoreEtcd {
		return "provisiond serve --data-dir " + end.DataDir
	}
	line := "provisiond serve --store etcd --etcd-endpoints " + strings.Join(end.Etcd.Endpoints, ",") + " --etcd-prefix " + prefixOf(end.Etcd)
	if end.DataDir != "" {
		line += " --data-dir " + end.DataDir
	}
	return line
}

// migrateProgress draws a bar on a terminal, and otherwise writes a plain
// line at each phase and each quarter of the copy.
func migrateProgress(w io.Writer) func(phase string, done, total int) {
	if progress.IsTerminal(w) {
		var bar *progress.Bar
		var cur string
		return func(phase string, done, total int) {
			if phase != cur {
				if bar != nil {
					bar.Done()
				}
				cur, bar = phase, progress.New(w, phase)
			}
			bar.Count(int64(done), int64(total), "records")
		}
	}
	var cur string
	quarter := 0
	return func(phase string, done, total int) {
		if phase != cur {
			cur, quarter = phase, 0
			switch phase {
			case "counting":
				fmt.Fprintln(w, "counting the source's records")
			case "history":
				fmt.Fprintln(w, "carrying the history of commits")
			case "copying":
				fmt.Fprintf(w, "copying %d records\n", total)
			case "verifying":
				fmt.Fprintf(w, "verifying: reading the target back\n")
			}
		}
		if phase == "copying" && total > 0 {
			for quarter < 4 && done*4 >= (quarter+1)*total {
				quarter++
				fmt.Fprintf(w, "copied %d of %d records (%d%%)\n", done, total, quarter*25)
			}
		}
	}
}

// restoreToEtcd loads the archive into the empty etcd prefix of ef
// (provisiond restore --to etcd), unpacked in $TMPDIR first.
func restoreToEtcd(ctx context.Context, e sys, archive io.Reader, file string, ef *etcdFlags, allowUnverified bool) error {
	ecfg, err := ef.config()
	if err != nil {
		return usageError{err}
	}
	if len(ecfg.Endpoints) == 0 {
		return usagef("restore --to etcd needs --etcd-endpoints")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := backup.RestoreToEtcd(ctx, archive, ecfg, "", allowUnverified, migrateProgress(e.stderr))
	if err != nil {
		return err
	}
	end := migrate.End{Store: daemon.StoreEtcd, Etcd: ecfg}
	fmt.Fprintf(e.stderr, "restored %s (controller %s, %d records) into %s; start its daemons with: %s --data-dir DIR\n",
		file, res.Controller, res.Records, describeEnd(end), serveLine(end))
	fmt.Fprintf(e.stderr, "note: %s\n", migrate.HistoryNote(res.History, res.SourceRevision, res.TargetRevision))
	return nil
}
