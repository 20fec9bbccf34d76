package cluster

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/sandbot/sandbot/internal/syncbuf"
)

// proc is a sandbot process (cmd/worker or cmd/bot) the test started. Its
// output goes to a file in the test's directory and is kept for checks;
// a failed test logs its end. It is SIGKILLed if the test binary dies.
type proc struct {
	name   string
	cmd    *exec.Cmd
	out    *syncbuf.Buffer
	exited chan struct{}
	// Addr is its metrics and health listener (SANDBOT_METRICS_ADDR).
	Addr string
}

// startProc starts bin with exactly env (nothing is inherited, so no
// SANDBOT_* variable of the machine leaks in). It is stopped when the test
// ends.
func startProc(t testing.TB, name, bin, dir string, env []string) *proc {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, out: &syncbuf.Buffer{}, exited: make(chan struct{})}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "SANDBOT_METRICS_ADDR="); ok {
			p.Addr = v
		}
	}
	var w io.Writer = io.MultiWriter(f, p.out)
	if os.Getenv("SANDBOT_TEST_LOG") != "" {
		w = io.MultiWriter(w, prefixWriter{name: name, w: os.Stderr})
	}
	p.cmd = exec.Command(bin)
	p.cmd.Dir = dir
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = w, w
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); _ = f.Close(); close(p.exited) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("--- %s (pid %d) output ends with:\n%s", name, p.cmd.Process.Pid, tail(p.out.String(), 3000))
		}
	})
	return p
}

// prefixWriter prefixes what a child writes with its name (SANDBOT_TEST_LOG).
type prefixWriter struct {
	name string
	w    io.Writer
}

func (p prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line != "" {
			fmt.Fprintf(p.w, "[%s] %s", p.name, line)
		}
	}
	return len(b), nil
}

// Pid is the process ID.
func (p *proc) Pid() int { return p.cmd.Process.Pid }

// Output is everything it printed so far.
func (p *proc) Output() string { return p.out.String() }

// Exited reports whether the process has ended.
func (p *proc) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL, as a host failure or an OOM kill would, and waits.
func (p *proc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop sends SIGTERM (a clean shutdown, as an orchestrator's stop), and
// SIGKILL if it is not gone within 20 s.
func (p *proc) Stop() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		p.Kill()
	}
}

// Wait waits for the process to exit by itself and returns its exit code.
func (p *proc) Wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		t.Fatalf("%s still running after %s; output:\n%s", p.name, d, tail(p.Output(), 3000))
		return -1
	}
}

// WaitReady waits until the process has printed banner (if not empty) and
// its /readyz answers 200 (if it has a health listener and ready is set).
func (p *proc) WaitReady(t testing.TB, banner string, ready bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	hc := http.Client{Timeout: 5 * time.Second}
	last := ""
	for time.Now().Before(deadline) {
		if p.Exited() {
			t.Fatalf("%s exited (%v) before it was ready; output:\n%s", p.name, p.cmd.ProcessState, tail(p.Output(), 3000))
		}
		ok := banner == "" || strings.Contains(p.Output(), banner)
		if ok && ready && p.Addr != "" {
			resp, err := hc.Get("http://" + p.Addr + "/readyz")
			if err != nil {
				ok, last = false, err.Error()
			} else {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				ok, last = resp.StatusCode == http.StatusOK, fmt.Sprintf("%s: %s", resp.Status, b)
			}
		}
		if ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not ready after %s (last /readyz: %s); output:\n%s", p.name, waitTimeout, last, tail(p.Output(), 3000))
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// lastLines is the last n lines of s: a failure's reason in a test's log
// without all the output before it.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Addresses: every worker host and bot replica gets a loopback address of
// its own (127.0.1.N; Linux routes all of 127/8 to lo) for its listener.
var nextIP atomic.Int32

// listenAddr picks a free port on a new loopback address.
func listenAddr(t testing.TB) string {
	t.Helper()
	n := nextIP.Add(1)
	ip := fmt.Sprintf("127.0.%d.%d", 1+n/250, 1+n%250)
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	defer l.Close()
	return net.JoinHostPort(ip, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
}

// s3store is an S3-compatible store on loopback: gofakes3 serves the real
// S3 REST protocol (SigV4-signed requests, path-style buckets), so the
// workers' AWS SDK and gocloud.dev s3blob talk to it exactly as to S3.
type s3store struct {
	backend *s3mem.Backend
	srv     *httptest.Server
}

var s3once struct {
	sync.Once
	s *s3store
}

// sharedS3 starts the store on first use; it lives as long as the test
// binary. Tests use buckets of their own.
func sharedS3() *s3store {
	s3once.Do(func() {
		b := s3mem.New()
		s3once.s = &s3store{backend: b, srv: httptest.NewServer(gofakes3.New(b).Server())}
	})
	return s3once.s
}

// Credentials the workers present (gofakes3 accepts any).
const (
	s3Key    = "AKIACLUSTERTEST00001"
	s3Secret = "cluster-test-secret-access-key-0123456789"
)

// CreateBucket makes a bucket.
func (s *s3store) CreateBucket(t testing.TB, name string) {
	t.Helper()
	if err := s.backend.CreateBucket(name); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
}

// URL is SANDBOT_SANDBOX_SNAPSHOT_URL for bucket, as an operator writes it
// for an S3-compatible store (see docker-compose.yml).
func (s *s3store) URL(bucket string) string {
	return "s3://" + bucket + "?region=us-east-1&endpoint=" + s.srv.URL + "&use_path_style=true&disable_https=true" +
		"&request_checksum_calculation=when_required&response_checksum_validation=when_required"
}

// Keys lists the object keys in bucket under prefix, sorted.
func (s *s3store) Keys(t testing.TB, bucket, prefix string) []string {
	t.Helper()
	res, err := s.backend.ListBucket(bucket, &gofakes3.Prefix{Prefix: prefix, HasPrefix: prefix != ""}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatalf("list %s/%s: %v", bucket, prefix, err)
	}
	var out []string
	for _, c := range res.Contents {
		out = append(out, c.Key)
	}
	sort.Strings(out)
	return out
}

// awsEnv is the AWS SDK's environment for the store: static credentials,
// and no shared config files or instance metadata to look at.
func awsEnv(dir string) []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s3Key, "AWS_SECRET_ACCESS_KEY=" + s3Secret,
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "no-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "no-aws-credentials"),
	}
}
