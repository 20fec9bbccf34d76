package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandbot/sandbot/internal/syncbuf"
)

// proc is one sandbot process of the stack (cmd/worker or cmd/bot). It can
// be killed and started again with the same environment, which is how the
// suite models a host that crashes and comes back. Its output goes to a
// file per start in the run's directory.
type proc struct {
	name string
	bin  string
	dir  string
	env  []string
	// addr is its health listener (SANDBOT_METRICS_ADDR).
	addr string

	mu     sync.Mutex
	cmd    *exec.Cmd
	out    *syncbuf.Buffer
	exited chan struct{}
	starts int
}

func newProc(name, bin, dir string, env []string) *proc {
	p := &proc{name: name, bin: bin, dir: dir, env: env}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "SANDBOT_METRICS_ADDR="); ok {
			p.addr = v
		}
	}
	return p
}

// start runs the process with exactly its environment (nothing inherited,
// so no SANDBOT_* variable of the machine leaks in) and waits until it is
// ready: banner printed (if set) and /readyz answering 200.
func (p *proc) start(ctx context.Context, banner string) error {
	p.mu.Lock()
	p.starts++
	f, err := os.Create(filepath.Join(p.dir, fmt.Sprintf("%s.%d.log", p.name, p.starts)))
	if err != nil {
		p.mu.Unlock()
		return err
	}
	out := &syncbuf.Buffer{}
	cmd := exec.Command(p.bin)
	cmd.Dir = p.dir
	cmd.Env = p.env
	cmd.Stdout = io.MultiWriter(f, out)
	cmd.Stderr = cmd.Stdout
	// The children die with the suite, whatever kills it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		_ = f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = f.Close(); close(exited) }()
	p.cmd, p.out, p.exited = cmd, out, exited
	p.mu.Unlock()
	return p.waitReady(ctx, banner)
}

func (p *proc) waitReady(ctx context.Context, banner string) error {
	hc := http.Client{Timeout: 5 * time.Second}
	last := ""
	for {
		p.mu.Lock()
		out, exited := p.out, p.exited
		p.mu.Unlock()
		select {
		case <-exited:
			return fmt.Errorf("%s exited before it was ready; output ends with:\n%s", p.name, tail(out.String(), 3000))
		default:
		}
		ok := banner == "" || strings.Contains(out.String(), banner)
		if ok && p.addr != "" {
			resp, err := hc.Get("http://" + p.addr + "/readyz")
			if err != nil {
				ok, last = false, err.Error()
			} else {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				ok, last = resp.StatusCode == http.StatusOK, fmt.Sprintf("%s: %s", resp.Status, b)
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready (last /readyz: %s): %w; output ends with:\n%s", p.name, last, ctx.Err(), tail(out.String(), 3000))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// running reports whether the process is up.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// pid is the current process's ID (0 when not running).
func (p *proc) pid() int {
	if !p.running() {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// kill sends SIGKILL, as a crash or an OOM kill would, and waits.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL, 0)
}

// stop sends SIGTERM and SIGKILL after 20 s.
func (p *proc) stop() {
	p.signal(syscall.SIGTERM, 20*time.Second)
}

func (p *proc) signal(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(sig)
	if grace == 0 {
		<-exited
		return
	}
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
}

// rssBytes is the resident set size of the running process (0 if not
// running), from /proc.
func (p *proc) rssBytes() int64 { return p.memory().RSS }

// residentMemory is a process's resident set as /proc/PID/status splits
// it: RSS in all, Anon the process's own memory (the Go heap, stacks and
// the runtime's), File the pages of mapped files (its binary, mostly).
// The split tells a heap that grows from one that only maps more of its
// binary.
type residentMemory struct{ RSS, Anon, File int64 }

// memory reads the running process's resident set (zero if not running).
func (p *proc) memory() residentMemory {
	var m residentMemory
	pid := p.pid()
	if pid == 0 {
		return m
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		kb, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			m.RSS = kb * 1024
		case "RssAnon":
			m.Anon = kb * 1024
		case "RssFile":
			m.File = kb * 1024
		}
	}
	return m
}

// debugAddr is the running process's debug listener (SANDBOT_DEBUG_ADDR,
// a free loopback port), from its "debug profiles" log line ("" if not
// found).
func (p *proc) debugAddr() string {
	p.mu.Lock()
	out := p.out
	p.mu.Unlock()
	if out == nil {
		return ""
	}
	m := debugAddrLine.FindAllStringSubmatch(out.String(), -1)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1][1]
}

var debugAddrLine = regexp.MustCompile(`msg="debug profiles" addr=(\S+)`)

// debugGetter returns a GET of a path on the running process's debug
// listener (its body; an error for any status but 200).
func (p *proc) debugGetter() (func(path string) ([]byte, error), error) {
	addr := p.debugAddr()
	if addr == "" {
		return nil, fmt.Errorf("%s: no debug address in its log", p.name)
	}
	hc := http.Client{Timeout: 60 * time.Second}
	return func(path string) ([]byte, error) {
		resp, err := hc.Get("http://" + addr + path)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s: %s", path, resp.Status)
		}
		return b, err
	}, nil
}

// saveProfiles writes the running process's live heap (after a
// collection: heap?gc=1) and goroutine profiles to dir as
// <name>-<tag>.heap and <name>-<tag>.goroutine, and returns its goroutine
// count (-1 if it could not be read).
func (p *proc) saveProfiles(dir, tag string) (int, error) {
	get, err := p.debugGetter()
	if err != nil {
		return -1, err
	}
	// The runtime's own account first (the text form ends with
	// runtime.MemStats: HeapSys, HeapIdle, HeapReleased, stacks), before
	// the collection the live-heap profile asks for changes it.
	stats, err := get("/debug/pprof/heap?debug=1")
	if err != nil {
		return -1, err
	}
	if err := os.WriteFile(filepath.Join(dir, p.name+"-"+tag+".memstats"), memStatsSection(stats), 0o644); err != nil {
		return -1, err
	}
	heap, err := get("/debug/pprof/heap?gc=1")
	if err != nil {
		return -1, err
	}
	if err := os.WriteFile(filepath.Join(dir, p.name+"-"+tag+".heap"), heap, 0o644); err != nil {
		return -1, err
	}
	g, err := get("/debug/pprof/goroutine?debug=1")
	if err != nil {
		return -1, err
	}
	if err := os.WriteFile(filepath.Join(dir, p.name+"-"+tag+".goroutine"), g, 0o644); err != nil {
		return -1, err
	}
	n := -1
	if m := goroutineTotal.FindSubmatch(g); m != nil {
		n, _ = strconv.Atoi(string(m[1]))
	}
	return n, nil
}

// liveHeap is the Go heap the running process still uses: it asks for a
// collection (heap?gc=1) and then reads HeapAlloc from the runtime's
// account (heap?debug=1), which holds little but live objects right after
// it.
func (p *proc) liveHeap() (int64, error) {
	get, err := p.debugGetter()
	if err != nil {
		return 0, err
	}
	if _, err := get("/debug/pprof/heap?gc=1"); err != nil {
		return 0, err
	}
	text, err := get("/debug/pprof/heap?debug=1")
	if err != nil {
		return 0, err
	}
	m := heapAllocLine.FindSubmatch(text)
	if m == nil {
		return 0, fmt.Errorf("%s: no HeapAlloc in its heap profile", p.name)
	}
	return strconv.ParseInt(string(m[1]), 10, 64)
}

var heapAllocLine = regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)$`)

var goroutineTotal = regexp.MustCompile(`goroutine profile: total (\d+)`)

// memStatsSection is the runtime.MemStats part of a text heap profile (the
// whole text if it has none): the per-stack records before it are what
// the binary .heap profile already holds.
func memStatsSection(text []byte) []byte {
	if i := bytes.Index(text, []byte("\n# runtime.MemStats")); i >= 0 {
		return text[i+1:]
	}
	return text
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// buildCommands builds cmd/worker and cmd/bot of the module that contains
// this package's source tree into dir.
func buildCommands(ctx context.Context, root, dir string) (worker, bot string, err error) {
	worker, bot = filepath.Join(dir, "sandbot-worker"), filepath.Join(dir, "sandbot-bot")
	for pkg, out := range map[string]string{"./cmd/worker": worker, "./cmd/bot": bot} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
		}
	}
	return worker, bot, nil
}

// moduleRoot finds the directory holding go.mod, from dir upwards.
func moduleRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod above %s: run the chaos suite from the sandbot source tree", dir)
		}
		d = parent
	}
}
