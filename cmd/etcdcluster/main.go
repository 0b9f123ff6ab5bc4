// Command etcdcluster runs an etcd cluster of several members in one
// process, on loopback, for trying provisiond's scale-out on one box
// (scripts/etcd-cluster.sh runs it with three daemons; docs/scale-out.md).
// The members are etcd's own server (go.etcd.io/etcd/server/v3/embed, the
// version provisiond's client is built with), started by internal/etcdtest
// with the limits provisiond needs (--max-txn-ops 1024,
// --max-request-bytes 8 MiB) on free ports. It is not a way to run etcd in
// production: use etcd's packages there.
//
//	etcdcluster [--members 3] [--dir DIR] [--endpoints-file FILE] [--fsync]
//
// It prints the client URLs on standard output (and writes them,
// comma-separated, to --endpoints-file), then runs until SIGINT or
// SIGTERM. SIGUSR1 stops the member that leads, as a crash would (a new
// leader is elected among the others); SIGUSR2 starts the stopped members
// again. The data of a run is for that run: DIR must be empty or missing.
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
	fs := flag.NewFlagSet("etcdcluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	members := fs.Int("members", 3, "number of members")
	dir := fs.String("dir", "", "directory for the members' data (default: a new temporary directory, removed at exit)")
	endpointsFile := fs.String("endpoints-file", "", "file to write the client URLs to, comma-separated, once the cluster is ready")
	fsync := fs.Bool("fsync", false, "fsync the members' writes (etcd's default; off here for speed)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *members < 1 {
		fmt.Fprintln(stderr, "usage: etcdcluster [--members N] [--dir DIR] [--endpoints-file FILE] [--fsync]")
		return 2
	}
	if err := serve(*members, *dir, *endpointsFile, *fsync, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "etcdcluster:", err)
		return 1
	}
	return 0
}

func serve(members int, dir, endpointsFile string, fsync bool, stdout, stderr io.Writer) error {
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

	c, err := etcdtest.Start(etcdtest.Options{Dir: dir, Members: members, NoFsync: !fsync})
	if err != nil {
		return err
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
	fmt.Fprintf(stdout, "etcd: %d members ready (data in %s): %s\n", members, filepath.Clean(dir), eps)
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
			fmt.Fprintf(stdout, "etcd: stopped the leader, member %s (%s)\n", c.Members()[i].Name, c.Members()[i].ClientURL)
		case syscall.SIGUSR2:
			for i, m := range c.Members() {
				if m.Running() {
					continue
				}
				if err := c.Restart(i); err != nil {
					fmt.Fprintln(stderr, "etcdcluster:", err)
					continue
				}
				fmt.Fprintf(stdout, "etcd: started member %s again (%s)\n", m.Name, m.ClientURL)
			}
		default:
			fmt.Fprintln(stdout, "etcd: stopping")
			return nil
		}
	}
	return errors.New("signal channel closed")
}
