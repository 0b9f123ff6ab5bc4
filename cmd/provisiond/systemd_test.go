package main

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// The shipped unit only uses settings the daemon has, runs "serve", and
// keeps its hardening.
func TestSystemdUnit(t *testing.T) {
	f, err := os.Open("../../contrib/systemd/provisiond.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var o options
	known := map[string]bool{"PROVISIOND_CONFIG": true}
	for _, s := range o.settings() {
		known[envName(s.name)] = true
	}
	env := map[string]string{}
	keys := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("unit line %q", line)
			continue
		}
		keys[k] = append(keys[k], v)
		if k == "Environment" {
			name, val, _ := strings.Cut(v, "=")
			if !known[name] {
				t.Errorf("Environment=%s: provisiond has no such setting", v)
			}
			env[name] = val
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if got := keys["ExecStart"]; len(got) != 1 || !strings.HasSuffix(got[0], "/provisiond serve") {
		t.Errorf("ExecStart = %q", got)
	}
	if env["PROVISIOND_DATA_DIR"] != "/var/lib/provisiond" || keys["StateDirectory"][0] != "provisiond" ||
		keys["ReadWritePaths"][0] != "/var/lib/provisiond" {
		t.Errorf("the data dir is not the state directory: env %v, keys %v", env, keys)
	}
	// The daemon as a service: readiness and watchdog (sd_notify), reload
	// by SIGHUP, the config file in the ConfigurationDirectory, the audit
	// log in the LogsDirectory.
	if keys["ConfigurationDirectory"][0] != "provisiond" || keys["LogsDirectory"][0] != "provisiond" ||
		!strings.HasPrefix(env["PROVISIOND_AUDIT_LOG"], "/var/log/provisiond/") {
		t.Errorf("configuration and logs directories: env %v, keys %v", env, keys)
	}
	if ConfigFileName != "provisiond.yaml" {
		t.Errorf("ConfigFileName = %q", ConfigFileName)
	}
	for _, k := range []string{"NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
		"CapabilityBoundingSet=", "KillSignal=SIGTERM", "Type=notify", "NotifyAccess=main", "WatchdogSec=30s",
		"ExecReload=/bin/kill -HUP $MAINPID"} {
		name, val, _ := strings.Cut(k, "=")
		if v := keys[name]; len(v) != 1 || v[0] != val {
			t.Errorf("%s: got %q", k, v)
		}
	}
}
