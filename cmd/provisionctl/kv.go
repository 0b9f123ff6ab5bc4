package main

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/provisiond/provisiond/size"
)

// Config values on the command line are KEY=VALUE. The value is typed the
// way an operator means it:
//
//   - true and false (any case) are booleans;
//   - a decimal number (-3, 42, 2.5, 1e3; no leading zeros, no hex) is a
//     number; on the server numbers are float64, so integers are exact up
//     to 2^53;
//   - a value quoted with "..." or '...' is the string inside the quotes,
//     so "true" or '42' stay strings;
//   - anything else, the empty value included, is a string as written
//     (yes, no, 0755, 5m, 1.2.3 are strings).
//
// The key is checked by the server (letters, digits, '-', '_', '.',
// starting with a letter); here it must only be non-empty.
var number = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)

// parseValue types one value (see above).
func parseValue(s string) any {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	switch strings.ToLower(s) {
	case "true":
		return true
	case "false":
		return false
	}
	if number.MatchString(s) {
		return json.Number(s)
	}
	return s
}

// parseKV splits KEY=VALUE and types the value.
func parseKV(arg string) (string, any, error) {
	k, v, ok := strings.Cut(arg, "=")
	if !ok {
		return "", nil, usagef("bad KEY=VALUE %q: no \"=\"", arg)
	}
	if k == "" {
		return "", nil, usagef("bad KEY=VALUE %q: empty key", arg)
	}
	return k, parseValue(v), nil
}

// parseKVs parses every argument as KEY=VALUE; a key given twice is a
// usage error.
func parseKVs(args []string) (map[string]any, error) {
	out := make(map[string]any, len(args))
	for _, a := range args {
		k, v, err := parseKV(a)
		if err != nil {
			return nil, err
		}
		if _, dup := out[k]; dup {
			return nil, usagef("key %q given twice", k)
		}
		out[k] = v
	}
	return out, nil
}

// checkStorageSizes checks the sizes in a storage constraint
// ("POOL,SIZE,COUNT", or "NAME=POOL,SIZE,COUNT") before it is sent, with
// the parser the daemon uses: a field starting with a digit or "." that is
// not a whole number (a count) is a size.
func checkStorageSizes(flag, value string) error {
	_, cons, named := strings.Cut(value, "=")
	if !named {
		cons = value
	}
	for f := range strings.SplitSeq(cons, ",") {
		if f == "" || !strings.ContainsAny(f[:1], "0123456789.") || strings.Trim(f, "0123456789") == "" {
			continue
		}
		if _, err := size.ParseMiB(f); err != nil {
			return usagef("%s %q: %v", flag, value, err)
		}
	}
	return nil
}
