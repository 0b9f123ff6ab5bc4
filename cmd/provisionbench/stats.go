package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// latencies collects durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	ds []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.ds = append(l.ds, d)
	l.mu.Unlock()
}

func (l *latencies) addAll(ds []time.Duration) {
	l.mu.Lock()
	l.ds = append(l.ds, ds...)
	l.mu.Unlock()
}

func (l *latencies) snapshot() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ds)
}

// percentile returns the p-th percentile (0..100) of ds by nearest rank;
// ds is sorted in place.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(math.Ceil(p/100*float64(len(ds)))) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// values are the named figures of one run, in the order they were set.
type values struct {
	order []string
	m     map[string]float64
	unit  map[string]string
	// counts are figures a run sets only when not 0 (setCount): a run
	// without one counted 0.
	counts map[string]bool
}

func newValues() *values {
	return &values{m: map[string]float64{}, unit: map[string]string{}}
}

func (v *values) set(name, unit string, x float64) {
	if _, ok := v.m[name]; !ok {
		v.order = append(v.order, name)
	}
	v.m[name] = x
	v.unit[name] = unit
}

// merge sets every figure of o, in its order.
func (v *values) merge(o *values) {
	for _, name := range o.order {
		v.set(name, o.unit[name], o.m[name])
		if o.counts[name] {
			v.setCount(name, o.m[name])
		}
	}
}

// setCount sets a count a run reports only when it is not 0 (a
// connection end's reason): in the runs that left it out it is 0.
func (v *values) setCount(name string, x float64) {
	v.set(name, "", x)
	if v.counts == nil {
		v.counts = map[string]bool{}
	}
	v.counts[name] = true
}

// Metric is one figure at one size: every run's value and their median.
type Metric struct {
	Name   string    `json:"name"`
	Unit   string    `json:"unit,omitempty"`
	Median float64   `json:"median"`
	Runs   []float64 `json:"runs"`
	// Baseline marks a figure of the same-run baseline rather than of
	// provisiond; Ratio marks a ratio of two medians.
	Baseline bool `json:"baseline,omitempty"`
	Ratio    bool `json:"ratio,omitempty"`
	// Difference marks a difference of two medians.
	Difference bool `json:"difference,omitempty"`
}

// SizeResult is a workload's figures at one size (agents or writers).
type SizeResult struct {
	Size    int       `json:"size"`
	Metrics []*Metric `json:"metrics"`
}

func (s *SizeResult) metric(name string) *Metric {
	for _, m := range s.Metrics {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// ratio is a figure computed from two medians of the same size.
type ratio struct {
	name, num, den string
}

// collect turns the runs of one size into metrics: medians of every
// figure, then the ratios (and differences) whose two figures exist.
func collect(size int, runs []*values, baseRuns []*values, ratios, diffs []ratio) SizeResult {
	res := SizeResult{Size: size}
	add := func(rs []*values, baseline bool) {
		if len(rs) == 0 {
			return
		}
		// The figures of the first run, in its order, with those only
		// later runs set (a count set when not 0) after the figure
		// they followed there.
		var names []string
		unit, count := map[string]string{}, map[string]bool{}
		for _, r := range rs {
			at := 0
			for _, name := range r.order {
				count[name] = count[name] || r.counts[name]
				if _, ok := unit[name]; ok {
					at = slices.Index(names, name) + 1
					continue
				}
				if r == rs[0] || r.counts[name] {
					names = slices.Insert(names, at, name)
					unit[name] = r.unit[name]
					at++
				}
			}
		}
		for _, name := range names {
			m := &Metric{Name: name, Unit: unit[name], Baseline: baseline}
			for _, r := range rs {
				if x, ok := r.m[name]; ok {
					m.Runs = append(m.Runs, x)
				} else if count[name] {
					m.Runs = append(m.Runs, 0)
				}
			}
			m.Median = median(m.Runs)
			res.Metrics = append(res.Metrics, m)
		}
	}
	add(runs, false)
	add(baseRuns, true)
	for _, r := range ratios {
		n, d := res.metric(r.num), res.metric(r.den)
		if n == nil || d == nil || d.Median == 0 {
			continue
		}
		res.Metrics = append(res.Metrics, &Metric{Name: r.name, Median: n.Median / d.Median, Ratio: true})
	}
	for _, r := range diffs {
		n, d := res.metric(r.num), res.metric(r.den)
		if n == nil || d == nil {
			continue
		}
		res.Metrics = append(res.Metrics, &Metric{Name: r.name, Unit: n.Unit, Median: n.Median - d.Median, Difference: true})
	}
	return res
}

// Report is the one JSON document a workload prints with --json.
type Report struct {
	Workload   string         `json:"workload"`
	Started    time.Time      `json:"started"`
	Daemon     string         `json:"daemon"`
	Repeat     int            `json:"repeat"`
	SizeName   string         `json:"size-name"`
	Parameters map[string]any `json:"parameters"`
	Machine    machineInfo    `json:"machine"`
	Sizes      []SizeResult   `json:"sizes"`
	Notes      []string       `json:"notes,omitempty"`
}

func (r *Report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(sanitize(r))
}

// sanitize replaces NaN and infinities, which JSON cannot carry, by 0.
func sanitize(r *Report) *Report {
	fix := func(x float64) float64 {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0
		}
		return x
	}
	for _, s := range r.Sizes {
		for _, m := range s.Metrics {
			m.Median = fix(m.Median)
			for i := range m.Runs {
				m.Runs[i] = fix(m.Runs[i])
			}
		}
	}
	return r
}

// writeTable prints the report as a table: one row per figure, one column
// per size, medians of the runs.
func (r *Report) writeTable(w io.Writer) {
	fmt.Fprintf(w, "%s: %s; daemon %s; median of %d run(s); %d cores, %s",
		r.Workload, describeParams(r.Parameters), r.Daemon, r.Repeat, r.Machine.Cores, r.Machine.GoVersion)
	if r.Machine.LoadStart >= 0 {
		fmt.Fprintf(w, "; load average %.2f at the start, %.2f at the end (the run's own processes included)",
			r.Machine.LoadStart, r.Machine.LoadEnd)
	}
	fmt.Fprintln(w)
	var names []string
	seen := map[string]bool{}
	labels := map[string]string{}
	for _, s := range r.Sizes {
		for _, m := range s.Metrics {
			if !seen[m.Name] {
				seen[m.Name] = true
				names = append(names, m.Name)
				label := m.Name
				switch {
				case m.Baseline:
					label = "baseline: " + label
				case m.Ratio:
					label = "ratio: " + label
				case m.Difference:
					label = "difference: " + label
				}
				if m.Unit != "" {
					label += " (" + m.Unit + ")"
				}
				labels[m.Name] = label
			}
		}
	}
	rows := [][]string{{r.SizeName}}
	for _, s := range r.Sizes {
		rows[0] = append(rows[0], fmt.Sprint(s.Size))
	}
	for _, n := range names {
		row := []string{labels[n]}
		for _, s := range r.Sizes {
			if m := s.metric(n); m != nil {
				row = append(row, formatNum(m.Median))
			} else {
				row = append(row, "-")
			}
		}
		rows = append(rows, row)
	}
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], len(c))
		}
	}
	for ri, row := range rows {
		var b strings.Builder
		for i, c := range row {
			if i == 0 {
				fmt.Fprintf(&b, "%-*s", widths[i], c)
			} else {
				fmt.Fprintf(&b, "  %*s", widths[i], c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
		if ri == 0 {
			fmt.Fprintln(w, strings.Repeat("-", len(strings.TrimRight(b.String(), " "))))
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

func describeParams(p map[string]any) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, p[k]))
	}
	return strings.Join(parts, " ")
}

func formatNum(x float64) string {
	switch {
	case math.IsNaN(x):
		return "-"
	case x == math.Trunc(x) && math.Abs(x) < 1e12:
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 100:
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.3g", x)
	}
}

// clockTicks is the unit of the times in /proc/<pid>/stat (USER_HZ,
// sysconf(_SC_CLK_TCK)), 100 on every Linux this runs on.
const clockTicks = 100

// procCPU returns the CPU time (user + system) process pid has used, from
// /proc/<pid>/stat (10 ms resolution).
func procCPU(pid int) (time.Duration, error) {
	f, err := statFields(fmt.Sprintf("/proc/%d/stat", pid), 13)
	if err != nil {
		return 0, err
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// statFields returns the fields of a /proc stat file (a process's or a
// thread's) from field 3 (state) on, at least want of them: the command
// name (field 2) may hold spaces, so they start after its closing
// parenthesis.
func statFields(path string, want int) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, fmt.Errorf("%s: unexpected stat format", path)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < want {
		return nil, fmt.Errorf("%s: unexpected stat format", path)
	}
	return f, nil
}

// histogram is a Prometheus histogram read from /metrics: cumulative
// counts by upper bound, in increasing order of bound (+Inf last).
type histogram struct {
	bounds []float64
	counts []float64
}

// errNoSeries: no series of a metric matched (a labelled series shows
// from its first observation on).
var errNoSeries = errors.New("no series matched")

// scrapeHistogram reads the buckets of histogram metric name (without the
// "_bucket" suffix) whose labels contain every one of want
// (`facade="ModelAdmin"`), summing over the series that match.
func scrapeHistogram(r io.Reader, name string, want ...string) (histogram, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	byBound := map[float64]float64{}
	prefix := name + "_bucket{"
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		labels, rest := line[len(prefix):end], strings.Fields(line[end+1:])
		ok := len(rest) > 0
		for _, w := range want {
			ok = ok && strings.Contains(labels, w)
		}
		i := strings.Index(labels, `le="`)
		if !ok || i < 0 {
			continue
		}
		le := labels[i+len(`le="`):]
		le = le[:strings.IndexByte(le, '"')]
		bound, err1 := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
		count, err2 := strconv.ParseFloat(rest[0], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		byBound[bound] += count
	}
	if err := sc.Err(); err != nil {
		return histogram{}, err
	}
	if len(byBound) == 0 {
		return histogram{}, fmt.Errorf("histogram %s: %w", name, errNoSeries)
	}
	var h histogram
	for b := range byBound {
		h.bounds = append(h.bounds, b)
	}
	slices.Sort(h.bounds)
	for _, b := range h.bounds {
		h.counts = append(h.counts, byBound[b])
	}
	return h, nil
}

// since returns the observations h holds beyond those of earlier (the same
// histogram read before).
func (h histogram) since(earlier histogram) histogram {
	out := histogram{bounds: h.bounds, counts: slices.Clone(h.counts)}
	if slices.Equal(h.bounds, earlier.bounds) {
		for i := range out.counts {
			out.counts[i] -= earlier.counts[i]
		}
	}
	return out
}

// quantileBound returns the upper bound of the bucket holding the p-th
// percentile (0..100) of h's observations: the figure is at most that.
// It is NaN when h is empty.
func (h histogram) quantileBound(p float64) float64 {
	if len(h.counts) == 0 || h.counts[len(h.counts)-1] == 0 {
		return math.NaN()
	}
	rank := math.Ceil(p / 100 * h.counts[len(h.counts)-1])
	for i, c := range h.counts {
		if c >= rank {
			return h.bounds[i]
		}
	}
	return math.Inf(1)
}
