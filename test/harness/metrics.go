package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Sample is one Prometheus sample.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples are the samples of one scrape.
type Samples []Sample

// Sum adds the samples of name whose labels include every pair of match.
func (s Samples) Sum(name string, match map[string]string) float64 {
	total := 0.0
	for _, x := range s {
		if x.Name != name {
			continue
		}
		ok := true
		for k, v := range match {
			if x.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			total += x.Value
		}
	}
	return total
}

// SumWhere adds the samples of name for which keep returns true.
func (s Samples) SumWhere(name string, keep func(map[string]string) bool) float64 {
	total := 0.0
	for _, x := range s {
		if x.Name == name && keep(x.Labels) {
			total += x.Value
		}
	}
	return total
}

// Scrape reads a Prometheus text endpoint and keeps the samples of names
// (all when none are given).
func Scrape(ctx context.Context, url string, names ...string) (Samples, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	return ParseMetrics(string(b), names...), nil
}

// ParseMetrics parses the Prometheus text format, keeping the samples of
// names (all when none are given). Comments and malformed lines are skipped.
func ParseMetrics(text string, names ...string) Samples {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out Samples
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, rest := line, map[string]string{}, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
			rest = line[i:]
		}
		if len(want) > 0 && !want[name] {
			continue
		}
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels = parseLabels(rest[1:end])
			rest = rest[end+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		out = append(out, Sample{Name: name, Labels: labels, Value: v})
	}
	return out
}

func parseLabels(s string) map[string]string {
	labels := map[string]string{}
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			break
		}
		key := strings.TrimSpace(strings.TrimPrefix(s[:eq], ","))
		var val strings.Builder
		i := eq + 2
		for ; i < len(s); i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				continue
			}
			if s[i] == '"' {
				break
			}
			val.WriteByte(s[i])
		}
		labels[key] = val.String()
		s = strings.TrimLeft(s[min(i+1, len(s)):], ", ")
	}
	return labels
}

// Percentile returns the p-quantile (0..1) of ds by nearest rank; 0 for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p*float64(len(s))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

// Max returns the largest of ds.
func Max(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// Ms renders d in milliseconds with one decimal.
func Ms(d time.Duration) float64 {
	return float64(d.Microseconds()/100) / 10
}
