package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/buildinfo"
)

type cliResult struct {
	code           int
	stdout, stderr string
}

// runBin runs the built provisiond with args and the given environment
// (and nothing else of the test's).
func runBin(t *testing.T, environ []string, args ...string) cliResult {
	t.Helper()
	bin := buildDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append([]string{"HOME=" + t.TempDir()}, environ...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %q: %v", args, err)
	}
	return cliResult{code, stdout.String(), stderr.String()}
}

// The command line on cobra: verbs, help, typo suggestions, exit codes,
// the flag package's single-dash spellings, completion.
func TestCommandLine(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string // substring of stdout ("" : not checked)
		stderr     string // substring of stderr
		noStdout   bool
		notInStdio string // in neither stream
	}{
		{name: "no verb", args: nil, code: 2, stderr: "Available Commands:", noStdout: true},
		{name: "help", args: []string{"help"}, code: 0, stdout: "serve"},
		{name: "help serve", args: []string{"help", "serve"}, code: 0, stdout: "$PROVISIOND_NAME"},
		{name: "serve --help", args: []string{"serve", "--help"}, code: 0, stdout: "--max-watchers"},
		{name: "serve -h", args: []string{"serve", "-h"}, code: 0, stdout: "--login-rate-refill"},
		{name: "serve -help", args: []string{"serve", "-help"}, code: 0, stdout: "--data-dir"},
		{name: "typo", args: []string{"serv"}, code: 2, stderr: "Did you mean this?\n\tserve", noStdout: true},
		{name: "typo backup", args: []string{"bakup"}, code: 2, stderr: "backup"},
		{name: "version", args: []string{"version"}, code: 0, stdout: "provisiond " + buildinfo.Version + " ("},
		{name: "--version", args: []string{"--version"}, code: 0, stdout: ", Juju API 3.3.0\n"},
		{name: "-version", args: []string{"-version"}, code: 0, stdout: ", Juju API 3.3.0\n"},
		{name: "version with args", args: []string{"version", "x"}, code: 2, stderr: "takes no arguments"},
		{name: "unknown flag", args: []string{"serve", "--adr", "x"}, code: 2, stderr: "unknown flag: --adr"},
		{name: "flag without value", args: []string{"serve", "--addr"}, code: 2, stderr: "needs an argument"},
		{name: "single-dash flag without value", args: []string{"serve", "-addr"}, code: 2, stderr: "needs an argument: --addr"},
		{name: "bad number", args: []string{"serve", "--max-watchers", "many"}, code: 2, stderr: "--max-watchers"},
		{name: "negative limit", args: []string{"serve", "--data-dir", "/nonexistent", "--max-watchers", "-1"}, code: 2, stderr: "--max-watchers -1: limits must not be negative"},
		{name: "negative duration", args: []string{"serve", "--data-dir", "/nonexistent", "--shed-latency", "-1s"}, code: 2, stderr: "--shed-latency -1s: durations must not be negative"},
		{name: "bad log level", args: []string{"serve", "--log-level", "loud"}, code: 2, stderr: "want debug, info, warn or error"},
		{name: "stray argument", args: []string{"serve", "extra"}, code: 2, stderr: "unexpected arguments"},
		{name: "backup without output", args: []string{"backup"}, code: 2, stderr: "--output"},
		{name: "restore without archive", args: []string{"restore", "--data-dir", "/x"}, code: 2, stderr: "the archive"},
		{name: "restore without data dir", args: []string{"restore", "a.tar"}, code: 2, stderr: "--data-dir"},
		{name: "check bad format", args: []string{"check", "--format", "xml"}, code: 2, stderr: "want text or json"},
		{name: "check single-dash", args: []string{"check", "-data-dir", "/nonexistent", "-format=json"}, code: 1, stdout: `"ok": false`},
		{name: "completion bash", args: []string{"completion", "bash"}, code: 0, stdout: "__start_provisiond"},
		{name: "complete verbs", args: []string{"__complete", "se"}, code: 0, stdout: "serve"},
		{name: "complete serve flags", args: []string{"__complete", "serve", "--log-"}, code: 0, stdout: "--log-level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runBin(t, nil, tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, tt.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tt.stdout, r.stdout)
			}
			if !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderr, r.stderr)
			}
			if tt.noStdout && r.stdout != "" {
				t.Errorf("stdout not empty: %s", r.stdout)
			}
			if tt.code == 2 && !strings.Contains(r.stderr, "provisiond help") && !strings.Contains(r.stderr, "--help\" for more") {
				t.Errorf("usage error without the help hint:\n%s", r.stderr)
			}
		})
	}
}
