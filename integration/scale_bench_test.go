package integration

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/sandbot/sandbot/config"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

// rpcCounter counts the Temporal RPCs a client makes, by method.
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *rpcCounter) interceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	c.n[method[strings.LastIndex(method, "/")+1:]]++
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *rpcCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// benchEnvInt reads a benchmark size from the environment.
func benchEnvInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive whole number", name, v)
	}
	return n
}

// BenchmarkIdleSessionsAtScale is the chaos issue's scale at rest: many
// sessions (SANDBOT_BENCH_IDLE_SESSIONS, default 10,000) each finish a turn
// and go idle on one real cmd/worker process. It reports the worker's
// resident memory and the bot's: this process's Go heap (which also holds
// the embedded server, so an upper bound) and, from its heap profile, the
// part the bot's own code keeps (botHeap); it counts every Temporal call the
// bot makes during an idle window (SANDBOT_BENCH_IDLE_WINDOW, default 1
// minute) — an idle session must cost no polling — and then wakes 100 of
// them at once with a message whose turn runs a tool call, reporting the
// p50/p95 time from the message to its first status card.
func BenchmarkIdleSessionsAtScale(b *testing.B) {
	sessions := benchEnvInt(b, "SANDBOT_BENCH_IDLE_SESSIONS", 10000)
	window := time.Minute
	if v := os.Getenv("SANDBOT_BENCH_IDLE_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("SANDBOT_BENCH_IDLE_WINDOW=%q: want a positive duration such as 1m", v)
		}
		window = d
	}
	const wake = 100
	// A finer heap sample than Go's default (512 KiB) for botHeap, set
	// before the bot is built.
	defer func(r int) { runtime.MemProfileRate = r }(runtime.MemProfileRate)
	runtime.MemProfileRate = 64 << 10
	rpcs := &rpcCounter{n: map[string]int{}}
	bin := buildWorkerTB(b)
	s := newStackClient(b, client.Options{ConnectionOptions: client.ConnectionOptions{
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(rpcs.interceptor)},
	}}, func(c *config.Config) { c.Session.ApprovalMode = "never" })
	s.worker.Stop()
	var tools atomic.Int32 // tool calls per turn the model asks for
	s.model.SetResponder(func(req fakeopenai.RecordedRequest) fakeopenai.Step {
		return toolLoop(int(tools.Load()))(req)
	})
	proc := exec.Command(bin)
	proc.Env = s.workerProcEnv("SANDBOT_LOG_LEVEL=error")
	if err := proc.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = proc.Process.Kill(); _ = proc.Wait() }()
	base := rssKB(b, proc.Process.Pid)
	// A finished turn leaves the session idle (its status stays the turn's
	// outcome).
	idle := func(st session.TurnState) bool { return st.Turn >= 1 && st.Status == session.StatusComplete }

	for n := 0; n < b.N; n++ {
		name := func(i int) string { return fmt.Sprintf("scale-%d-%d", n, i) }
		start := time.Now()
		sem := make(chan struct{}, 32)
		var wg sync.WaitGroup
		errs := make(chan error, sessions)
		for i := range sessions {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				th := s.thread(name(i))
				if err := s.core.HandleMessage(s.ctx, s.poster, chatMessage(th, "e-"+name(i), "hello")); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		for i := range sessions {
			s.waitStateEvery(s.thread(name(i)), 200*time.Millisecond, "idle", idle)
		}
		created := time.Since(start)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		rss := rssKB(b, proc.Process.Pid)
		bot := botHeap()

		// The idle window: nothing but the bot's own background work.
		before := rpcs.snapshot()
		time.Sleep(window)
		after := rpcs.snapshot()
		var calls []string
		idleCalls, idleQueries := 0, 0
		for m, v := range after {
			if d := v - before[m]; d > 0 {
				calls = append(calls, fmt.Sprintf("%s %d", m, d))
				idleCalls += d
				if m == "QueryWorkflow" {
					idleQueries += d
				}
			}
		}
		slices.Sort(calls)
		perMinute := func(k int) float64 { return float64(k) / window.Minutes() }

		// Wake 100 at once, each with a turn of one tool call.
		tools.Store(1)
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		picked := rng.Perm(sessions)[:min(wake, sessions)]
		postsIn := func(name string) int {
			posts, _ := s.poster.snapshot()
			k := 0
			for _, p := range posts {
				if p.Thread.Thread == name {
					k++
				}
			}
			return k
		}
		lat := make([]time.Duration, len(picked))
		var wwg sync.WaitGroup
		for j, i := range picked {
			had := postsIn(name(i))
			wwg.Go(func() {
				t0 := time.Now()
				th := s.thread(name(i))
				if err := s.core.HandleMessage(s.ctx, s.poster, chatMessage(th, "w-"+name(i), "again")); err != nil {
					b.Error(err)
					return
				}
				deadline := time.After(waitTimeout)
				for {
					s.poster.mu.Lock()
					ch := s.poster.changed
					s.poster.mu.Unlock()
					if postsIn(name(i)) > had {
						break
					}
					select {
					case <-ch:
					case <-deadline:
						b.Errorf("no status card in %s within %s of its message", name(i), waitTimeout)
						return
					}
				}
				lat[j] = time.Since(t0)
			})
		}
		wwg.Wait()
		if b.Failed() {
			return
		}
		tools.Store(0)
		slices.Sort(lat)
		p50, p95 := lat[len(lat)/2], lat[len(lat)*95/100]

		b.ReportMetric(float64(rss)/1024, "MB-worker-rss")
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "MB-bot-process-heap")
		b.ReportMetric(float64(bot)/(1<<20), "MB-bot-heap")
		b.ReportMetric(perMinute(idleQueries), "idle-queries/min")
		b.ReportMetric(perMinute(idleCalls), "idle-calls/min")
		b.ReportMetric(float64(p50.Milliseconds()), "wake-p50-ms")
		b.ReportMetric(float64(p95.Milliseconds()), "wake-p95-ms")
		b.Logf("%d sessions created and idle in %s; worker RSS %.1f MB (at start %.1f MB); bot process heap in use %.1f MB (embedded server included), of which the bot's own live heap about %.1f MB; "+
			"idle %s: %d queries, %d Temporal calls in all (%.1f/min: %s); waking %d at once: first card p50 %s, p95 %s",
			sessions, created.Round(time.Second), float64(rss)/1024, float64(base)/1024, float64(ms.HeapInuse)/(1<<20), float64(bot)/(1<<20),
			window, idleQueries, idleCalls, perMinute(idleCalls), strings.Join(calls, ", "), len(picked), p50.Round(time.Millisecond), p95.Round(time.Millisecond))
	}
}

// botHeap is the live heap (after collections) that the bot's own code
// allocated: each heap-profile sample is charged to the innermost sandbot
// function on its stack, and counted when that function is the chat core's
// or botapp's (not the test's recording poster, nor the embedded server),
// scaled as pprof scales a sample. It is an estimate: Go samples the heap
// about once per runtime.MemProfileRate bytes allocated.
func botHeap() int64 {
	runtime.GC()
	runtime.GC() // the profile reflects the last completed cycle
	n, _ := runtime.MemProfile(nil, false)
	var recs []runtime.MemProfileRecord
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, false); ok {
			recs = recs[:n]
			break
		}
	}
	const mod = "github.com/sandbot/sandbot/"
	rate := float64(runtime.MemProfileRate)
	var total float64
	for _, r := range recs {
		objs, bytes := r.InUseObjects(), r.InUseBytes()
		if objs <= 0 || bytes <= 0 {
			continue
		}
		frames := runtime.CallersFrames(r.Stack())
		owner := ""
		for {
			f, more := frames.Next()
			if i := strings.Index(f.Function, mod); i >= 0 {
				owner = f.Function[i+len(mod):]
				break
			}
			if !more {
				break
			}
		}
		if !strings.HasPrefix(owner, "chat") && !strings.HasPrefix(owner, "internal/botapp") {
			continue
		}
		avg := float64(bytes) / float64(objs)
		total += float64(bytes) / (1 - math.Exp(-avg/rate))
	}
	return int64(total)
}
