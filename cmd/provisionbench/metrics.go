package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Reading the daemon's /metrics (Prometheus text) for the report.

// scrape returns the sum of the samples of metric name in /metrics.
func (t *target) scrape(name string) (float64, error) {
	resp, err := t.httpc.Get("https://" + t.addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return scrapeMetric(resp.Body, name)
}

// scrapeSeries reads the named series from one GET of /metrics, each the
// sum of its samples; a series not served is left out of the map.
func (t *target) scrapeSeries(names []string) (map[string]float64, error) {
	resp, err := t.httpc.Get("https://" + t.addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return scrapeSeries(resp.Body, names)
}

// scrapeHist reads histogram metric name (see scrapeHistogram) from
// /metrics.
func (t *target) scrapeHist(name string, want ...string) (histogram, error) {
	resp, err := t.httpc.Get("https://" + t.addr + "/metrics")
	if err != nil {
		return histogram{}, err
	}
	defer resp.Body.Close()
	return scrapeHistogram(resp.Body, name, want...)
}

func scrapeMetric(r io.Reader, name string) (float64, error) {
	m, err := scrapeSeries(r, []string{name})
	if err != nil {
		return 0, err
	}
	v, ok := m[name]
	if !ok {
		return 0, fmt.Errorf("metric %s not found", name)
	}
	return v, nil
}

func scrapeSeries(r io.Reader, names []string) (map[string]float64, error) {
	out := make(map[string]float64, len(names))
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range names {
			if v, ok := sampleOf(line, name); ok {
				out[name] += v
			}
		}
	}
	return out, sc.Err()
}

// sampleOf is the value of line when it is a sample of metric name.
func sampleOf(line, name string) (float64, bool) {
	if !strings.HasPrefix(line, name) {
		return 0, false
	}
	rest := line[len(name):]
	if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
		return 0, false
	}
	f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}
