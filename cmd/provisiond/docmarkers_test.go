package main

import (
	"bufio"
	"bytes"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// workLogMarker is how a work log names its entries: "Session" or
// "Issue" and a number. The docs and the code's comments describe the
// product as it is now; history goes in commit messages.
var workLogMarker = regexp.MustCompile(`[Ss]ession [0-9]|[Ii]ssue [0-9]`)

// No work log marker in README.md, docs/*.md or a Go
// comment anywhere in the module (vendor and testdata aside).
func TestNoWorkLogMarkers(t *testing.T) {
	root := filepath.Join("..", "..")
	var found []string
	report := func(path string, line int, text string) {
		rel, err := filepath.Rel(root, path)
		if err != nil {
			rel = path
		}
		found = append(found, rel+":"+strconv.Itoa(line)+": "+strings.TrimSpace(text))
	}

	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	for _, path := range docs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			if workLogMarker.MatchString(sc.Text()) {
				report(path, n, sc.Text())
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}

	goFiles := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "vendor" || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		goFiles++
		fset := token.NewFileSet()
		file := fset.AddFile(path, -1, len(src))
		var s scanner.Scanner
		s.Init(file, src, nil, scanner.ScanComments)
		for {
			pos, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if tok != token.COMMENT {
				continue
			}
			for i, l := range strings.Split(lit, "\n") {
				if workLogMarker.MatchString(l) {
					report(path, fset.Position(pos).Line+i, l)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if goFiles < 100 {
		t.Fatalf("scanned %d Go files under %s: not the module", goFiles, root)
	}
	for _, f := range found {
		t.Errorf("work log marker (docs and comments say what is, history goes in commit messages): %s", f)
	}
}
