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
	"syscall"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
)

// backup: provisiond backup --output FILE [--credentials FILE | --data-dir DIR]
func backup(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("provisiond backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	output := fs.String("output", "", "file to write the backup archive to (required)")
	credsFile := fs.String("credentials", os.Getenv("PROVISIOND_CREDENTIALS"), "credentials.yaml of the daemon (default: the one in --data-dir)")
	dataDir := fs.String("data-dir", defaultDataDir(os.Getenv), "data dir of the running daemon, to find credentials.yaml")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: provisiond backup --output FILE [--credentials FILE | --data-dir DIR]\n\n"+
			"Takes a consistent snapshot of a running daemon's database, with its credentials and TLS\n"+
			"material, as a tar archive. Example:\n\n  provisiond backup --output provisiond-backup.tar\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitFlags(err)
	}
	if *output == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	path := *credsFile
	if path == "" {
		path = filepath.Join(*dataDir, daemon.CredentialsFile)
	}
	creds, err := daemon.ReadCredentials(path)
	if err != nil {
		fmt.Fprintf(stderr, "provisiond backup: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	tmp := *output + ".partial"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		fmt.Fprintf(stderr, "provisiond backup: %v\n", err)
		return 1
	}
	bar := newProgress(stderr, "backup")
	err = daemon.FetchBackup(ctx, creds, f, bar.update)
	bar.done()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, *output)
	}
	if err != nil {
		os.Remove(tmp)
		fmt.Fprintf(stderr, "provisiond backup: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "backup written to %s\n", *output)
	return 0
}

// restore: provisiond restore FILE --data-dir DIR [--force]
func restore(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("provisiond restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "", "data dir to restore into (required; must not be in use)")
	force := fs.Bool("force", false, "replace a database already in the data dir (never a live one)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: provisiond restore FILE --data-dir DIR [--force]\n\n"+
			"Unpacks a backup into a data dir the daemon can start from. Example:\n\n"+
			"  provisiond restore provisiond-2026-11-30.tar --data-dir /var/lib/provisiond\n\n")
		fs.PrintDefaults()
	}
	// Accept the archive before or after the flags.
	var file string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return exitFlags(err)
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if file == "" || *dataDir == "" {
		fs.Usage()
		return 2
	}
	f, err := os.Open(file)
	if err != nil {
		fmt.Fprintf(stderr, "provisiond restore: %v\n", err)
		return 1
	}
	defer f.Close()
	if err := daemon.Restore(f, *dataDir, *force); err != nil {
		fmt.Fprintf(stderr, "provisiond %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "restored %s into %s; start it with: provisiond serve --data-dir %s\n", file, *dataDir, *dataDir)
	return 0
}

func exitFlags(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// progress draws a one-line progress bar on a terminal, and nothing
// elsewhere.
type progress struct {
	w     io.Writer
	label string
	tty   bool
	last  time.Time
	shown bool
}

func newProgress(w io.Writer, label string) *progress {
	p := &progress{w: w, label: label}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) update(done, total int64) {
	if !p.tty || (time.Since(p.last) < 100*time.Millisecond && done != total) {
		return
	}
	p.last = time.Now()
	p.shown = true
	if total <= 0 {
		fmt.Fprintf(p.w, "\r%s %s", p.label, mib(done))
		return
	}
	const width = 30
	n := int(done * width / total)
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = ' '
		if i < n {
			bar[i] = '='
		}
	}
	fmt.Fprintf(p.w, "\r%s [%s] %3d%% %s / %s", p.label, bar, done*100/total, mib(done), mib(total))
}

func (p *progress) done() {
	if p.shown {
		fmt.Fprintln(p.w)
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
