package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseValue(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want any
	}{
		{"true", true}, {"FALSE", false}, {"True", true},
		{"42", json.Number("42")}, {"-3", json.Number("-3")}, {"2.5", json.Number("2.5")},
		{"1e3", json.Number("1e3")}, {"0", json.Number("0")},
		{"0755", "0755"}, {"0x1f", "0x1f"}, {"1.2.3", "1.2.3"}, {"5m", "5m"}, {"yes", "yes"},
		{"", ""}, {"hello world", "hello world"}, {"<root>=DEBUG", "<root>=DEBUG"},
		{`"42"`, "42"}, {"'true'", "true"}, {`""`, ""}, {`"unbalanced`, `"unbalanced`}, {`'x"`, `'x"`},
	} {
		if got := parseValue(tc.in); got != tc.want {
			t.Errorf("parseValue(%q) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

func TestParseKVs(t *testing.T) {
	got, err := parseKVs([]string{"a=1", "b=x=y", "c="})
	if err != nil || got["a"] != json.Number("1") || got["b"] != "x=y" || got["c"] != "" {
		t.Fatalf("parseKVs = %v, %v", got, err)
	}
	for _, bad := range [][]string{{"novalue"}, {"=1"}, {"a=1", "a=2"}} {
		if _, err := parseKVs(bad); err == nil || !isUsage(err) {
			t.Errorf("parseKVs(%q) = %v, want a usage error", bad, err)
		}
	}
}

func TestFormatValueRoundTrips(t *testing.T) {
	for _, v := range []any{"plain", "42", "true", "", "0755", 42.0, true, 2.5} {
		shown := formatValue(v)
		back := parseValue(shown)
		if n, ok := back.(json.Number); ok {
			f, _ := n.Float64()
			back = f
		}
		if back != v {
			t.Errorf("formatValue(%#v) = %q reads back as %#v", v, shown, back)
		}
	}
}

func TestTableFits80Columns(t *testing.T) {
	tb := table{header: []string{"KEY", "VALUE"}, cutLast: true}
	tb.add("ca-cert", "-----BEGIN CERTIFICATE-----\nMIIB...")
	tb.add("long", strings.Repeat("x", 200))
	tb.add("unicode", strings.Repeat("é", 100))
	tb.add("short", "v")
	var buf bytes.Buffer
	if err := tb.write(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > tableWidth {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
	if lines[1] != "ca-cert  -----BEGIN CERTIFICATE-----..." || !strings.HasSuffix(lines[2], "xxx...") || lines[4] != "short    v" {
		t.Errorf("table:\n%s", buf.String())
	}
}

func TestTableKeepsIdentifiers(t *testing.T) {
	tb := table{header: []string{"NAME", "UUID"}}
	long := strings.Repeat("n", 63)
	uuid := "0b1c6f0f-8f8e-4c2a-9d3b-5e6f7a8b9c0d"
	tb.add(long, uuid)
	tb.add("a", "multi\nline")
	var buf bytes.Buffer
	if err := tb.write(&buf); err != nil {
		t.Fatal(err)
	}
	if want := "NAME" + strings.Repeat(" ", 61) + "UUID\n" + long + "  " + uuid + "\na" + strings.Repeat(" ", 64) + "multi...\n"; buf.String() != want {
		t.Errorf("table:\n%q\nwant\n%q", buf.String(), want)
	}
}

// Every verb documents an example in --help.
func TestEveryVerbHasAnExample(t *testing.T) {
	a := &app{getenv: func(string) string { return "" }}
	root := a.rootCommand()
	n := 0
	stack := root.Commands()
	for len(stack) > 0 {
		c := stack[0]
		stack = append(stack[1:], c.Commands()...)
		n++
		if !c.HasExample() {
			t.Errorf("%s has no example", c.CommandPath())
		}
	}
	if n < 8 || !root.HasExample() {
		t.Errorf("walked %d commands", n)
	}
}
