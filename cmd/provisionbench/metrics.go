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
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var sum float64
	found := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("metric %s not found", name)
	}
	return sum, sc.Err()
}
