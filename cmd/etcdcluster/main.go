// Command etcdcluster runs an etcd cluster of several members in one
// process, on loopback, for trying provisiond's scale-out on one box
// (scripts/etcd-cluster.sh runs it with three daemons; docs/scale-out.md).
// The members are etcd's own server (go.etcd.io/etcd/server/v3/embed, the
// version provisiond's client is built with), started by internal/etcdtest
// with the limits provisiond needs (--max-txn-ops 1024,
// --max-request-bytes 8 MiB) on free ports. It is not a way to run etcd in
// production: use etcd's packages there.
//
//	etcdcluster [--members 3] [--dir DIR] [--endpoints-file FILE] [--fsync] [--processes]
//	            [--quota-backend-bytes N]
//
// It prints the client URLs on standard output (and writes them,
// comma-separated, to --endpoints-file), then runs until SIGINT or
// SIGTERM. SIGUSR1 stops the member that leads, as a crash would (a new
// leader is elected among the others); SIGUSR2 starts the stopped members
// again. The data of a run is for that run: DIR must be empty or missing.
//
// With --processes each member runs in a process of its own (etcdcluster
// run again with etcdtest.MemberFlag, internal/etcdtest's Processes), and
// their pids are printed: kill -STOP PID hangs a member as a stalled
// machine would, kill -CONT PID lets it go on. internal/e2e's tests run
// members this way.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if code, ok := etcdtest.MemberMain(args, stderr); ok {
		return code
	}
	fs := flag.NewFlagSet("etcdcluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	members := fs.Int("members", 3, "number of members")
	dir := fs.String("dir", "", "directory for the members' data (default: a new temporary directory, removed at exit)")
	endpointsFile := fs.String("endpoints-file", "", "file to write the client URLs to, comma-separated, once the cluster is ready")
	fsync := fs.Bool("fsync", false, "fsync the members' writes (etcd's default; off here for speed)")
	processes := fs.Bool("processes", false, "run each member in a process of its own (their pids are printed, for kill -STOP)")
	quota := fs.Int64("quota-backend-bytes", 0, "etcd's --quota-backend-bytes (0: etcd's default, 2 GiB)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *members < 1 || *quota < 0 {
		fmt.Fprintln(stderr, "usage: etcdcluster [--members N] [--dir DIR] [--endpoints-file FILE] [--fsync] [--processes] [--quota-backend-bytes N]")
		return 2
	}
	opts := etcdtest.Options{Members: *members, NoFsync: !*fsync, QuotaBackendBytes: *quota}
	if err := serve(opts, *processes, *dir, *endpointsFile, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "etcdcluster:", err)
		return 1
	}
	return 0
}

// cluster is either kind of cluster: members in this process
// (etcdtest.Cluster) or each in its own (etcdtest.Processes).
type cluster interface {
	Endpoints() []string
	Leader(ctx context.Context) (int, error)
	Stop(i int)
	Running(i int) bool
	Restart(i int) error
	Close()
}

func serve(opts etcdtest.Options, inProcesses bool, dir, endpointsFile string, stdout, stderr io.Writer) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "etcdcluster-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("--dir %s is not empty (a cluster's data is for one run)", dir)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)

	opts.Dir = dir
	var c cluster
	if inProcesses {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		p, err := etcdtest.StartProcesses(self, opts)
		if err != nil {
			return err
		}
		c = p
	} else {
		ec, err := etcdtest.Start(opts)
		if err != nil {
			return err
		}
		c = ec
	}
	defer c.Close()
	eps := strings.Join(c.Endpoints(), ",")
	if endpointsFile != "" {
		tmp := endpointsFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(eps+"\n"), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, endpointsFile); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "etcd: %d members ready (data in %s): %s\n", opts.Members, filepath.Clean(dir), eps)
	if p, ok := c.(*etcdtest.Processes); ok {
		for _, m := range p.Members() {
			fmt.Fprintf(stdout, "etcd: member %s (%s) is pid %d (kill -STOP %d hangs it, kill -CONT %d lets it go on; log %s)\n",
				m.Name, m.ClientURL, m.Pid(), m.Pid(), m.Pid(), m.Log)
		}
	}
	for sig := range sigs {
		switch sig {
		case syscall.SIGUSR1:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			i, err := c.Leader(ctx)
			cancel()
			if err != nil {
				fmt.Fprintln(stderr, "etcdcluster:", err)
				continue
			}
			c.Stop(i)
			fmt.Fprintf(stdout, "etcd: stopped the leader, member m%d (%s)\n", i, c.Endpoints()[i])
		case syscall.SIGUSR2:
			for i, ep := range c.Endpoints() {
				if c.Running(i) {
					continue
				}
				if err := c.Restart(i); err != nil {
					fmt.Fprintln(stderr, "etcdcluster:", err)
					continue
				}
				fmt.Fprintf(stdout, "etcd: started member m%d again (%s)\n", i, ep)
			}
		default:
			fmt.Fprintln(stdout, "etcd: stopping")
			return nil
		}
	}
	return errors.New("signal channel closed")
}
