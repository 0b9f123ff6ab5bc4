package dashboard

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Colour contrast (WCAG 2.1 AA): every colour of the style sheet is a
// variable of :root, and each pair the page draws text in (or a focus ring,
// or a chart line, against what is behind it) has the ratio it needs.
func TestColourContrast(t *testing.T) {
	css := string(assets["app.css"].data)
	root := regexp.MustCompile(`(?s):root\s*\{(.*?)\}`).FindStringSubmatch(css)
	if root == nil {
		t.Fatal("app.css has no :root block")
	}
	vars := map[string]string{}
	for _, m := range regexp.MustCompile(`--([a-z0-9-]+):\s*(#[0-9a-fA-F]{6})\s*;`).FindAllStringSubmatch(root[1], -1) {
		vars[m[1]] = m[2]
	}
	// No colour outside :root, so the pairs below see every colour used.
	rest := strings.Replace(css, root[0], "", 1)
	if m := regexp.MustCompile(`#[0-9a-fA-F]{3,8}\b|rgba?\(|hsla?\(`).FindString(rest); m != "" {
		t.Errorf("app.css uses a colour (%s) outside :root", m)
	}
	const text, ui = 4.5, 3.0
	pairs := []struct {
		fg, bg string
		min    float64
	}{
		{"fg", "bg", text}, {"fg", "panel", text}, {"fg", "fresh-bg", text},
		{"muted", "bg", text}, {"muted", "panel", text}, {"muted", "fresh-bg", text},
		{"muted", "err-bg", text}, {"muted", "warn-bg", text},
		{"link", "bg", text}, {"link", "panel", text},
		{"accent-fg", "accent", text}, {"accent", "bg", text}, {"button-fg", "button", text},
		{"err-fg", "err-bg", text}, {"warn-fg", "warn-bg", text}, {"ok-fg", "ok-bg", text},
		{"err-fg", "bg", text}, {"ok-fg", "bg", text},
		{"focus", "bg", ui}, {"focus", "panel", ui}, {"accent-fg", "accent", ui},
		{"err-fg", "err-bg", ui}, {"warn-fg", "bg", ui},
		{"chart-1", "panel", ui}, {"chart-2", "panel", ui}, {"chart-3", "panel", ui}, {"chart-4", "panel", ui},
	}
	for _, p := range pairs {
		fg, bg := vars[p.fg], vars[p.bg]
		if fg == "" || bg == "" {
			t.Errorf("--%s or --%s is not a #rrggbb variable of :root", p.fg, p.bg)
			continue
		}
		if r := contrast(fg, bg); r < p.min {
			t.Errorf("--%s %s on --%s %s: contrast %.2f, want at least %.1f", p.fg, fg, p.bg, bg, r, p.min)
		}
	}
}

func luminance(hex string) float64 {
	var c [3]float64
	for i := range c {
		v, _ := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		s := float64(v) / 255
		if s <= 0.04045 {
			c[i] = s / 12.92
		} else {
			c[i] = math.Pow((s+0.055)/1.055, 2.4)
		}
	}
	return 0.2126*c[0] + 0.7152*c[1] + 0.0722*c[2]
}

func contrast(a, b string) float64 {
	la, lb := luminance(a), luminance(b)
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

// The Content-Security-Policy allows no inline script or style and no
// HTML parsing from strings: the assets must not need them.
func TestAssetsNeedNoInlineCode(t *testing.T) {
	for _, name := range []string{"index.html", "login.html"} {
		b, err := assetFS.ReadFile("assets/" + name)
		if err != nil {
			t.Fatal(err)
		}
		html := string(b)
		for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(html, -1) {
			if !strings.Contains(tag, ` src="/dashboard/static/`) {
				t.Errorf("%s: %s is not one of the page's own files", name, tag)
			}
		}
		for _, bad := range []*regexp.Regexp{
			regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]`), // a script with a body
			regexp.MustCompile(`\sstyle=`), regexp.MustCompile(`<style`),
			regexp.MustCompile(`\son[a-z]+=`), regexp.MustCompile(`javascript:`),
			regexp.MustCompile(`(?i)https?://`), // no other origin
		} {
			if m := bad.FindString(html); m != "" {
				t.Errorf("%s has %q, which the policy refuses", name, m)
			}
		}
	}
	js := string(assets["app.js"].data)
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setAttribute('style'", "http://", "https://"} {
		if strings.Contains(js, bad) && !(bad == "http://" && strings.Count(js, "http://") == strings.Count(js, "http://www.w3.org/2000/svg")) {
			t.Errorf("app.js uses %s", bad)
		}
	}
	if !strings.Contains(contentSecurityPolicy, "script-src 'self'") || strings.Contains(contentSecurityPolicy, "unsafe") {
		t.Errorf("policy %q", contentSecurityPolicy)
	}
}

// The package holds no way to write to the state: it is handed a Reader
// (read methods only), never the *state.State itself.
func TestReadsOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "*state.State") {
			t.Errorf("%s names *state.State: the dashboard reads through Reader only", f)
		}
	}
}
