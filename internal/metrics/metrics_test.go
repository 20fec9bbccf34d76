package metrics_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandbot/sandbot/internal/metrics"
	"github.com/sandbot/sandbot/internal/metrics/metricstest"
)

// Every sandbot metric is named sandbot_*, and none is labelled with an
// identifier (session, thread, user, call): cardinality stays bounded.
func TestNamesAndLabelsAreBounded(t *testing.T) {
	touchAll()
	fams := metricstest.Gather(t, metrics.NewRegistry())
	banned := []string{"session", "thread", "user", "call_id", "workflow", "channel", "id"}
	n := 0
	for name, f := range fams {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		n++
		if !strings.HasPrefix(name, "sandbot_") {
			t.Errorf("%s is not named sandbot_*", name)
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, b := range banned {
					if l.GetName() == b || strings.HasSuffix(l.GetName(), "_"+b) || strings.HasPrefix(l.GetName(), b+"_") {
						t.Errorf("%s has label %s", name, l.GetName())
					}
				}
			}
		}
	}
	if n < 15 {
		t.Errorf("only %d sandbot metrics gathered", n)
	}
}

// Register on a registry that already has the collectors is not an error,
// and a second registry sees the same values.
func TestRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := metrics.Register(reg); err != nil {
		t.Fatalf("second Register: %v", err)
	}
	before := metricstest.Gather(t, reg).Value("sandbot_turns_total", "outcome", metrics.TurnFailed)
	metrics.TurnEnded(metrics.TurnFailed)
	if got := metricstest.Gather(t, metrics.NewRegistry()).Value("sandbot_turns_total", "outcome", metrics.TurnFailed); got != before+1 {
		t.Errorf("turns{failed} = %v, want %v", got, before+1)
	}
}

// The README's table and the sample Grafana dashboard name only metrics
// that exist.
func TestDocumentedMetricsExist(t *testing.T) {
	touchAll()
	fams := metricstest.Gather(t, metrics.NewRegistry())
	name := regexp.MustCompile(`\bsandbot_[a-z_]*[a-z]\b`)
	for _, file := range []string{"../../README.md", "../../deploy/grafana/sandbot.json", "../../docs/ARCHITECTURE.md"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range name.FindAllString(string(b), -1) {
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if _, ok := fams[base]; !ok {
					base = strings.TrimSuffix(base, suffix)
				}
			}
			if _, ok := fams[base]; !ok {
				t.Errorf("%s names %s, which is not a sandbot metric", file, n)
			}
		}
	}
}

// touchAll counts once into every vector, so each has a series to gather.
func touchAll() {
	metrics.TurnEnded(metrics.TurnComplete)
	metrics.ToolCallEnded("completed")
	metrics.ApprovalDecided("approve", time.Second)
	metrics.ModelCall(metrics.ModelOK, time.Second)
	metrics.ModelTokens(1, 1)
	metrics.ExecCommand("local", metrics.ExecOK, time.Millisecond)
	metrics.Snapshot("local", metrics.SnapshotWritten, 10, time.Millisecond)
	metrics.ChatCall("slack", "chat.update", true)
	metrics.ChatRateLimited("slack", time.Second)
	metrics.ChatWaited("slack", metrics.WaitPace, time.Millisecond)
	metrics.SetSessions(1, 0)

}
