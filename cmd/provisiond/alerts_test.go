package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The alerting rules shipped in contrib/prometheus are valid rules
// (promtool check rules), each fires as its unit tests say (promtool test
// rules), and each metric they name is one a daemon serves (those of etcd
// mode alone: described in the operator guide) and the guide describes.
func TestAlertingRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		const why = "no promtool on PATH (Debian: apt-get install -y prometheus)"
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s: .ci/run installs it", why)
		}
		t.Skip("skipping the alerting rules' check: " + why)
	}
	const dir = "../../contrib/prometheus"
	for _, args := range [][]string{{"check", "rules", "provisiond-alerts.yaml"}, {"test", "rules", "provisiond-alerts_test.yaml"}} {
		cmd := exec.CommandContext(t.Context(), promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	rules, err := os.ReadFile(dir + "/provisiond-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile("../../docs/operator-guide.md")
	if err != nil {
		t.Fatal(err)
	}
	served := servedMetrics(t)
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`provisiond_\w+`).FindAll(rules, -1) {
		named[strings.TrimSuffix(string(m), "_bucket")] = true
	}
	for name := range named {
		if !regexp.MustCompile(`\b` + name + `\b`).Match(guide) {
			t.Errorf("the rules name %s, which docs/operator-guide.md does not describe", name)
		}
		etcdOnly := strings.HasPrefix(name, "provisiond_store_etcd_") || name == "provisiond_store_quota_bytes"
		if !etcdOnly && !regexp.MustCompile(`(?m)^# HELP `+name+` `).Match(served) {
			t.Errorf("the rules name %s, which a daemon does not serve", name)
		}
	}
	if len(named) < 10 {
		t.Errorf("the rules name %d provisiond metrics; want every alert of the guide's table", len(named))
	}
}
