package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
	"golang.org/x/term"

	"github.com/provisiond/provisiond/rpc/params"
)

// Output formats.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
)

var formats = []string{formatTable, formatJSON, formatYAML}

// formatFlag is the value of --format; it refuses unknown formats while
// the flags are parsed, so a typo is a usage error.
type formatFlag string

func (f *formatFlag) String() string { return string(*f) }
func (f *formatFlag) Type() string   { return "format" }
func (f *formatFlag) Set(s string) error {
	for _, ok := range formats {
		if s == ok {
			*f = formatFlag(s)
			return nil
		}
	}
	return fmt.Errorf("want one of %s", strings.Join(formats, ", "))
}

// addFormatFlag adds --format (default table) to cmd.
func addFormatFlag(cmd *cobra.Command, f *formatFlag) {
	addFormatFlagDefault(cmd, f, formatTable)
}

// addFormatFlagDefault adds --format with another default (the show verbs
// print yaml, as Juju's).
func addFormatFlagDefault(cmd *cobra.Command, f *formatFlag, def formatFlag) {
	*f = def
	cmd.Flags().Var(f, "format", "output format: "+strings.Join(formats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}

// write prints v as JSON or YAML, or calls table for the table format.
func write(w io.Writer, format formatFlag, v any, table func(io.Writer) error) error {
	switch format {
	case formatJSON:
		return writeJSON(w, v)
	case formatYAML:
		return writeYAML(w, v)
	}
	return table(w)
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	b, err := compactJSON(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// compactJSON is v as compact JSON without HTML escaping (a "<" stays a
// "<" for the operator reading it).
func compactJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// writeYAML writes v as block YAML with the keys in the order of its JSON
// form (the wire types' keys, hyphenated).
func writeYAML(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil {
		return err
	}
	blockStyle(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// blockStyle clears the flow and quoting styles JSON parsing gives, so the
// encoder picks block style and quotes only what needs it.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// Table layout.
const (
	tableWidth = 80 // lines fit this many columns
	minValue   = 20 // a last column is never cut below this
)

// table writes aligned columns with two spaces between them. A value
// spanning lines shows its first line only. With cutLast, the last column
// is cut (with "...") so lines fit tableWidth columns, or, for a MESSAGE
// column, the terminal's width (whole when not written to a terminal);
// tables whose last column is an identifier (a UUID) leave it whole.
type table struct {
	header  []string
	rows    [][]string
	cutLast bool
}

// terminalWidth is the width of the terminal w writes to, if it is one.
func terminalWidth(w io.Writer) (int, bool) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0, false
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil || cols <= 0 {
		return tableWidth, true
	}
	return cols, true
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) error {
	n := len(t.header)
	widths := make([]int, n)
	for _, r := range append([][]string{t.header}, t.rows...) {
		for i := 0; i < n-1 && i < len(r); i++ {
			widths[i] = max(widths[i], utf8.RuneCountInString(r[i]))
		}
	}
	used := 0
	for _, wd := range widths[:n-1] {
		used += wd + 2
	}
	last := max(tableWidth-used, minValue)
	if t.header[n-1] == "MESSAGE" {
		// A status message is cut only to fit a terminal (as ps does);
		// piped or redirected, it is whole.
		if cols, ok := terminalWidth(w); ok {
			last = max(cols-used, minValue)
		} else {
			last = int(^uint(0) >> 1)
		}
	}
	if !t.cutLast {
		last = int(^uint(0) >> 1)
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	for _, r := range append([][]string{t.header}, t.rows...) {
		cells := make([]string, n)
		copy(cells, r)
		cells[n-1] = cut(cells[n-1], last)
		for i := range cells {
			cells[i] = strings.ReplaceAll(cells[i], "\t", " ")
		}
		if _, err := fmt.Fprintln(tw, strings.Join(cells, "\t")); err != nil {
			return err
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// An empty last cell leaves the padding of the one before it.
	for l := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(w, strings.TrimRight(l, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// cut shortens s to its first line and at most n characters, marking a
// cut with "...".
func cut(s string, n int) string {
	line, _, multi := strings.Cut(s, "\n")
	r := []rune(line)
	if !multi && len(r) <= n {
		return line
	}
	if len(r)+3 > n {
		r = r[:max(n-3, 0)]
	}
	return string(r) + "..."
}

// formatValue shows a config value in a table as it would be typed in
// KEY=VALUE: strings as they are, unless they would read back as another
// type (or are empty), then quoted; numbers and booleans as JSON.
func formatValue(v any) string {
	if s, ok := v.(string); ok {
		if back, same := parseValue(s).(string); !same || back != s || s == "" {
			return strconv.Quote(s)
		}
		return s
	}
	b, err := compactJSON(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// mutation is the json and yaml of every verb that changes something, in
// one shape whose keys are always present: the model acted on (name and
// UUID; "" for controller-wide verbs), what the verb added, changed, made
// dying and removed, by kind ("machines", "units", ...: a verb always
// lists the kinds it can touch, empty when it touched none), and the
// resulting entity as the matching show verb or listing prints it (null
// when the verb has no single result). Sizes in it are MiB ("size") or
// bytes ("size-bytes").
type mutation struct {
	Model     string              `json:"model"`
	ModelUUID string              `json:"model-uuid"`
	Added     map[string][]string `json:"added"`
	Changed   map[string][]string `json:"changed"`
	Dying     map[string][]string `json:"dying"`
	Removed   map[string][]string `json:"removed"`
	Result    any                 `json:"result"`
}

func newMutation() *mutation {
	return &mutation{Added: map[string][]string{}, Changed: map[string][]string{}, Dying: map[string][]string{},
		Removed: map[string][]string{}}
}

func appendIDs(m map[string][]string, kind string, ids []string) {
	if m[kind] == nil {
		m[kind] = []string{}
	}
	m[kind] = append(m[kind], ids...)
}

func (m *mutation) added(kind string, ids ...string) *mutation {
	appendIDs(m.Added, kind, ids)
	return m
}
func (m *mutation) changed(kind string, ids ...string) *mutation {
	appendIDs(m.Changed, kind, ids)
	return m
}
func (m *mutation) dying(kind string, ids ...string) *mutation {
	appendIDs(m.Dying, kind, ids)
	return m
}
func (m *mutation) removed(kind string, ids ...string) *mutation {
	appendIDs(m.Removed, kind, ids)
	return m
}
func (m *mutation) result(v any) *mutation { m.Result = v; return m }

// writeMutation prints a mutating verb's outcome: the mutation document
// with json or yaml (the model named by model, resolved to its name and
// UUID; "" for controller-wide verbs), else the message for people on
// stderr.
func (a *app) writeMutation(ctx context.Context, format formatFlag, model string, m *mutation, message func()) error {
	if format == formatTable {
		message()
		return nil
	}
	if model != "" && m.Model == "" {
		ms, err := a.resolveModel(ctx, model)
		if err != nil {
			return err
		}
		m.Model, m.ModelUUID = ms.Name, ms.UUID
	}
	return write(a.stdout, format, m, nil)
}

// resolveModel finds a model from a name or UUID (as the daemon does: a
// UUID first). A model just removed is reported as it was named.
func (a *app) resolveModel(ctx context.Context, model string) (params.ModelSummary, error) {
	var res params.ListModelsResult
	if err := a.call(ctx, "ListModels", nil, &res); err != nil {
		return params.ModelSummary{}, err
	}
	for _, m := range res.Models {
		if m.UUID == model {
			return m, nil
		}
	}
	for _, m := range res.Models {
		if m.Name == model {
			return m, nil
		}
	}
	return params.ModelSummary{Name: model}, nil
}
