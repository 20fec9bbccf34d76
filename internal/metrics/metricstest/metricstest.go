// Package metricstest reads metrics back for tests: scrape a /metrics
// endpoint (or gather a registry) and look up one series' value.
package metricstest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are scraped metric families by name.
type Families map[string]*dto.MetricFamily

// Scrape GETs url (a /metrics endpoint) and parses the text exposition.
func Scrape(t testing.TB, url string) Families {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: parse: %v", url, err)
	}
	return fams
}

// Gather collects g's families.
func Gather(t testing.TB, g prometheus.Gatherer) Families {
	t.Helper()
	list, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	fams := Families{}
	for _, f := range list {
		fams[f.GetName()] = f
	}
	return fams
}

// Value sums the series of metric name whose labels include every
// name=value pair of labels: a counter's or gauge's value, or a
// histogram's sample count (name without the _count suffix). A metric
// that is absent reads as 0.
func (f Families) Value(name string, labels ...string) float64 {
	fam := f[name]
	if fam == nil {
		return 0
	}
	var sum float64
	for _, m := range fam.GetMetric() {
		if !matches(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum
}

// Sum is a histogram's sum of observations over the matching series.
func (f Families) Sum(name string, labels ...string) float64 {
	fam := f[name]
	if fam == nil {
		return 0
	}
	var sum float64
	for _, m := range fam.GetMetric() {
		if matches(m, labels) && m.Histogram != nil {
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return sum
}

// Has reports whether a family whose name starts with prefix is present.
func (f Families) Has(prefix string) bool {
	for name := range f {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

func matches(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
