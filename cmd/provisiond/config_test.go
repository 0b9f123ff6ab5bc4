package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestOptionsPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "provisiond.yaml")
	if err := os.WriteFile(file, []byte("addr: 10.0.0.1:1\nlog-level: debug\nping-timeout: 90s\nmax-watchers: 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := env(map[string]string{"HOME": "/home/x", "PROVISIOND_LOG_LEVEL": "warn", "PROVISIOND_MAX_WATCHERS": "9"})
	o, err := loadOptions([]string{"--config", file, "--max-watchers", "11"}, e, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != "10.0.0.1:1" { // file over default
		t.Errorf("addr = %q", o.Addr)
	}
	if o.LogLevel != "warn" { // env over file
		t.Errorf("log-level = %q", o.LogLevel)
	}
	if o.MaxWatchers != 11 { // flag over env
		t.Errorf("max-watchers = %d", o.MaxWatchers)
	}
	if o.PingTimeout != 90*time.Second {
		t.Errorf("ping-timeout = %v", o.PingTimeout)
	}
	if o.DataDir != "/home/x/.local/share/provisiond" {
		t.Errorf("data-dir = %q", o.DataDir)
	}
}

func TestOptionsDefaults(t *testing.T) {
	o, err := loadOptions(nil, env(map[string]string{"XDG_DATA_HOME": "/d"}), &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != "127.0.0.1:17070" || o.DataDir != "/d/provisiond" || o.LogFormat != "text" || o.PingTimeout != 3*time.Minute ||
		o.HistoryRetention != "7d" || o.daemonConfig().HistoryRetention.Age != 7*24*time.Hour {
		t.Errorf("defaults = %+v", o)
	}
}

func TestOptionsErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	_ = os.WriteFile(bad, []byte("adr: typo\n"), 0o600)
	floor := filepath.Join(t.TempDir(), "floor.yaml")
	_ = os.WriteFile(floor, []byte("gc-heap-floor: 134217728\n"), 0o600)
	retention := filepath.Join(t.TempDir(), "retention.yaml")
	_ = os.WriteFile(retention, []byte("history-retention: a week\n"), 0o600)
	const removed = "gc-heap-floor was removed: drop it and set the Go runtime's GOGC"
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown key in file", []string{"--config", bad}, nil, "field adr not found"},
		{"missing file", []string{"--config", "/nonexistent.yaml"}, nil, "no such file"},
		{"bad env number", nil, map[string]string{"PROVISIOND_MAX_WATCHERS": "many"}, `"many" is not a whole number`},
		{"bad env duration", nil, map[string]string{"PROVISIOND_PING_TIMEOUT": "soon"}, "is not a duration"},
		{"bad env boolean", nil, map[string]string{"PROVISIOND_REBALANCE": "sometimes"}, `"sometimes" is not true or false`},
		{"bad boolean flag", []string{"--rebalance=sometimes"}, nil, `invalid argument "sometimes" for "--rebalance" flag`},
		{"stray argument", []string{"extra"}, nil, "unexpected arguments"},
		// The removed heap floor, wherever an operator's setup still
		// carries it, is refused with its replacement named.
		{"removed gc-heap-floor flag", []string{"--gc-heap-floor", "134217728"}, nil, removed},
		{"removed gc-heap-floor env", nil, map[string]string{"PROVISIOND_GC_HEAP_FLOOR": "134217728"}, removed},
		{"removed gc-heap-floor in file", []string{"--config", floor}, nil, removed},
		{"history retention too short", []string{"--history-retention", "10s"}, nil, `--history-retention: history retention "10s": the duration must be one minute at least`},
		{"history retention zero revisions", nil, map[string]string{"PROVISIOND_HISTORY_RETENTION": "0"}, "the number of revisions must be at least 1"},
		{"negative drain", []string{"--drain", "-1s"}, nil, "--drain: -1s: want a duration from 0 to 1h0m0s"},
		{"drain over an hour", nil, map[string]string{"PROVISIOND_DRAIN": "2h"}, "--drain: 2h0m0s: want a duration from 0 to 1h0m0s"},
		{"history retention in file", []string{"--config", retention}, nil, `history retention "a week": the duration must be one minute at least`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadOptions(tt.args, env(tt.env), &strings.Builder{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v; want %q", err, tt.want)
			}
		})
	}
	// 0, the daemon's behaviour now, is what the floor's 0 asked for.
	if _, err := loadOptions([]string{"--gc-heap-floor", "0"}, env(nil), &strings.Builder{}); err != nil {
		t.Errorf("--gc-heap-floor 0: %v", err)
	}
	if _, err := newLogger(&strings.Builder{}, "xml", "info"); err == nil {
		t.Error("log format xml accepted")
	}
	if _, err := newLogger(&strings.Builder{}, "text", "loud"); err == nil {
		t.Error("log level loud accepted")
	}
}
