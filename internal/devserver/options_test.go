package devserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// Bad options are refused before anything starts, with a message that says what is allowed.
func TestStartRejectsBadOptions(t *testing.T) {
	dir := t.TempDir()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port

	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"neither file nor memory", Options{}, "DBPath is required"},
		{"both file and memory", Options{DBPath: filepath.Join(dir, "x.db"), Ephemeral: true}, "exclude each other"},
		{"DBPath is a directory", Options{DBPath: dir}, "is a directory"},
		{"bad IP", Options{Ephemeral: true, IP: "localhost"}, "not an IP address"},
		{"port out of range", Options{Ephemeral: true, Port: 70000}, "out of range"},
		{"port in use", Options{Ephemeral: true, Port: busyPort}, "port " + strconv.Itoa(busyPort) + " on 127.0.0.1 is not available"},
		{"UI port in use", Options{Ephemeral: true, UIPort: busyPort}, "UI port " + strconv.Itoa(busyPort) + " is not available"},
		{"UI port equals port", Options{Ephemeral: true, Port: 7233, UIPort: 7233}, "needs a port of its own"},
		{"bad namespace", Options{Ephemeral: true, Namespace: "my namespace"}, "Namespace \"my namespace\" is invalid"},
		{"negative retention", Options{Ephemeral: true, Retention: -time.Hour}, "Retention -1h0m0s is negative"},
		{"search attribute name", Options{Ephemeral: true, SearchAttributes: map[string]enumspb.IndexedValueType{"has space": enumspb.INDEXED_VALUE_TYPE_KEYWORD}}, "name must be"},
		{"reserved search attribute", Options{Ephemeral: true, SearchAttributes: map[string]enumspb.IndexedValueType{"WorkflowId": enumspb.INDEXED_VALUE_TYPE_KEYWORD}}, "reserved"},
		{"search attribute without type", Options{Ephemeral: true, SearchAttributes: map[string]enumspb.IndexedValueType{"SandbotOwner": enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED}}, "use one of Text, Keyword"},
		{"too many of one type", Options{Ephemeral: true, SearchAttributes: manyBools(50)}, "cannot have more than"},
		{"unknown dynamic config key", Options{Ephemeral: true, DynamicConfig: map[string]any{"limit.historyCount.suggestContinueAsNw": 10}}, `unregistered key "limit.historycount.suggestcontinueasnw"`},
		{"dynamic config of the wrong type", Options{Ephemeral: true, DynamicConfig: map[string]any{"limit.historyCount.suggestContinueAsNew": "lots"}}, "validation failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
			defer cancel()
			s, err := Start(ctx, tc.opts)
			if err == nil {
				_ = s.Stop()
				t.Fatalf("Start succeeded; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "devserver: ") {
				t.Fatalf("error %q; want it to start with \"devserver: \" and contain %q", err, tc.want)
			}
		})
	}
}

func manyBools(n int) map[string]enumspb.IndexedValueType {
	m := make(map[string]enumspb.IndexedValueType, n)
	for i := range n {
		m["Flag"+strconv.Itoa(i)] = enumspb.INDEXED_VALUE_TYPE_BOOL
	}
	return m
}

// Overrides reach the server as the typed values a dynamic config file would give; a
// time.Duration means what it says, not seconds.
func TestDynamicConfigValues(t *testing.T) {
	dc, err := buildDynamicConfig(map[string]any{
		"system.namespaceCacheRefreshInterval":    1500 * time.Millisecond,
		"limit.historyCount.suggestContinueAsNew": 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	coll := dynamicconfig.NewCollection(dc, log.NewNoopLogger())
	if got := dynamicconfig.NamespaceCacheRefreshInterval.Get(coll)(); got != 1500*time.Millisecond {
		t.Errorf("namespace cache refresh interval = %v, want 1.5s", got)
	}
	if got := dynamicconfig.HistoryCountSuggestContinueAsNew.Get(coll)("any"); got != 20 {
		t.Errorf("history count suggest continue-as-new = %d, want 20", got)
	}
	if got := dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Get(coll)(); got {
		t.Errorf("search attribute cache refresh on read is on: a database read in every workflow task with an upsert")
	}
	if got := dynamicconfig.HistorySizeSuggestContinueAsNew.Get(coll)("any"); got != 4*1024*1024 {
		t.Errorf("history size suggest continue-as-new = %d, want the default 4 MiB", got)
	}
}

// The log bridge passes warnings and errors with their tags, drops the chatter below, and goes
// quiet once closed.
func TestServerLoggerBridge(t *testing.T) {
	rec := &recordHandler{}
	l := newServerLogger(slog.New(rec))
	l.Debug("debug")
	l.Info("info")
	l.With(tag.NewStringTag("service", "history")).Warn("warned", tag.NewInt("shard", 1))
	l.Error("failed", tag.Error(errors.New("boom")))
	l.close()
	l.Warn("after close")
	l.With(tag.NewStringTag("k", "v")).Error("after close")

	want := []string{"WARN warned service=history shard=1", "ERROR failed error=boom"}
	if got := rec.lines(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("logged %q, want %q", got, want)
	}

	defer func() {
		r := recover()
		var fe fatalError
		if e, ok := r.(error); !ok || !errors.As(e, &fe) || !strings.Contains(fe.Error(), "cannot go on") {
			t.Fatalf("Fatal panicked with %v, want a fatalError naming the message", r)
		}
	}()
	newServerLogger(slog.New(rec)).Fatal("cannot go on")
	t.Fatal("Fatal returned")
}

// A port taken after it was picked makes the server call Fatal while it is being built; Start
// turns that into an error instead of a crash.
func TestStartServerTurnsFatalIntoError(t *testing.T) {
	o, err := Options{Ephemeral: true}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	p, err := pickPorts(o.IP, 0)
	if err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", net.JoinHostPort(loopback, strconv.Itoa(p.history)))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := buildConfig(o, p)
	if err := createNamespace(sqliteConfig(cfg), clusterName, o); err != nil {
		t.Fatal(err)
	}
	dyn, err := buildDynamicConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{bridge: newServerLogger(slog.New(slog.DiscardHandler))}
	err = s.startServer(cfg, staticHosts(o, p), dyn)
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("startServer with a taken port: err = %v; want an 'address already in use' error", err)
	}
}

type recordHandler struct {
	mu  sync.Mutex
	out []string
}

func (r *recordHandler) Enabled(context.Context, slog.Level) bool { return true }

func (r *recordHandler) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Level.String() + " " + rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		line += " " + a.Key + "=" + a.Value.String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.out = append(r.out, line)
	return nil
}

func (r *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recordHandler) WithGroup(string) slog.Handler      { return r }

func (r *recordHandler) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.out...)
}
