package pgtemporal

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/sandbot/sandbot/internal/freeport"
	"github.com/sandbot/sandbot/internal/syncbuf"
)

// historyShards is the clusters' history shard count. It is fixed when a
// database gets its first server, so every server of this package uses
// the same.
const historyShards = 4

// Server is the Temporal server as a child process on databases that
// exist. Its ports are picked once, by NewServer, and stay the same
// across restarts, so clients reconnect to the same address as they would
// to a production frontend.
type Server struct {
	spec      childSpec
	secure    *Secure // spec.Secure with the client certificate
	dir       string
	log       *os.File
	clientLog sdklog.Logger

	mu     sync.Mutex
	proc   *exec.Cmd
	exited chan struct{}
}

// NewServer prepares a server on db, on free ports, without starting it
// (Start). dir is the server's own: it holds its spec file and its log
// (temporal.log). Close it.
func NewServer(dir string, db Databases, o Options) (*Server, error) {
	ports, err := freeport.Ports(5)
	if err != nil {
		return nil, fmt.Errorf("pick the server's ports: %w", err)
	}
	clientLog := o.ClientLog
	if clientLog == nil {
		clientLog = slog.New(slog.DiscardHandler)
	}
	s := &Server{dir: dir, secure: o.Secure, clientLog: sdklog.NewStructuredLogger(clientLog)}
	s.spec = childSpec{Databases: db, Shards: historyShards, Secure: o.Secure}
	s.spec.Frontend, s.spec.FrontendHTTP, s.spec.History, s.spec.Matching, s.spec.Worker = ports[0], ports[1], ports[2], ports[3], ports[4]
	if s.log, err = os.Create(filepath.Join(dir, "temporal.log")); err != nil {
		return nil, fmt.Errorf("the server's log: %w", err)
	}
	return s, nil
}

// HostPort is the frontend address.
func (s *Server) HostPort() string { return s.spec.frontendAddr() }

// Databases are the server's stores.
func (s *Server) Databases() Databases { return s.spec.Databases }

// ExitError is Start's error when the server child exited before it was
// ready, with all it said on stderr: a test of a server that must refuse
// to start reads the reason there.
type ExitError struct {
	Stderr string
}

func (e *ExitError) Error() string {
	return "temporal server exited at start: " + lastLines(e.Stderr, 5)
}

// run starts a server child and waits until it is ready or has exited; it
// returns the child, a channel closed when it exits, and, if it failed,
// what it said on stderr.
func (s *Server) run() (*exec.Cmd, chan struct{}, string, error) {
	b, err := json.Marshal(s.spec)
	if err != nil {
		return nil, nil, "", err
	}
	specPath := filepath.Join(s.dir, "server.json")
	if err := os.WriteFile(specPath, b, 0o600); err != nil {
		return nil, nil, "", fmt.Errorf("the server's spec: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, "", err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), ServeEnv+"="+specPath)
	var stderr syncbuf.Buffer
	cmd.Stderr = io.MultiWriter(s.log, &stderr)
	// The child dies with this process, whatever kills it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, "", fmt.Errorf("start the temporal server child: %w", err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			if sc.Text() == "ready" && !said {
				said = true
				ready <- true
			}
		}
		if !said {
			ready <- false
		}
	}()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	select {
	case ok := <-ready:
		if ok {
			return cmd, exited, "", nil
		}
		<-exited
		return cmd, exited, stderr.String(), &ExitError{Stderr: stderr.String()}
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		<-exited
		return cmd, exited, stderr.String(), errors.New("temporal server not ready after 3 minutes")
	}
}

// Start starts the server (again, after Stop or Kill) on the same ports
// and databases.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return errors.New("temporal server already running")
	}
	// The ports are fixed (clients reconnect to the same address), and a
	// port can be taken while the server is down by another process's
	// outgoing connection; that passes, so try again a few times.
	for attempt := 1; ; attempt++ {
		cmd, exited, stderr, err := s.run()
		if err == nil {
			s.proc, s.exited = cmd, exited
			return nil
		}
		if attempt == 5 || !strings.Contains(stderr, "address already in use") {
			return err
		}
		time.Sleep(time.Second)
	}
}

// Stop stops the server cleanly (SIGTERM) and waits for it.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

// Kill kills the server (SIGKILL), as a crash or an OOM kill would.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	_ = s.proc.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(time.Minute):
		_ = s.proc.Process.Kill()
		<-s.exited
	}
	s.proc = nil
}

// Close kills the server and closes its log; LogTail still reads it.
func (s *Server) Close() {
	s.Kill()
	if s.log != nil {
		_ = s.log.Close()
	}
}

// LogTail is the end of the server's log: its last n bytes.
func (s *Server) LogTail(n int) string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "temporal.log"))
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// ClientOptions are the options of a client of namespace ns: the frontend
// address and, for a secure server, the CA, the client certificate and
// the API key.
func (s *Server) ClientOptions(ns string) (client.Options, error) {
	o := client.Options{HostPort: s.HostPort(), Namespace: ns, Logger: s.clientLog}
	sec := s.secure
	if sec == nil {
		return o, nil
	}
	ca, err := os.ReadFile(sec.CA)
	if err != nil {
		return client.Options{}, fmt.Errorf("the secure server's CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return client.Options{}, fmt.Errorf("the secure server's CA %s: no PEM certificate", sec.CA)
	}
	cert, err := tls.LoadX509KeyPair(sec.ClientCert, sec.ClientKey)
	if err != nil {
		return client.Options{}, fmt.Errorf("the client certificate for the secure server: %w", err)
	}
	o.Credentials = client.NewAPIKeyStaticCredentials(sec.APIKey)
	o.ConnectionOptions.TLS = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, Certificates: []tls.Certificate{cert}}
	return o, nil
}

// Dial connects a client to namespace ns, with ClientOptions.
func (s *Server) Dial(ctx context.Context, ns string) (client.Client, error) {
	o, err := s.ClientOptions(ns)
	if err != nil {
		return nil, err
	}
	cl, err := client.DialContext(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("dial the temporal server at %s: %w", s.HostPort(), err)
	}
	return cl, nil
}

// CreateNamespace registers ns with the search attributes given and waits
// until both are usable (the frontend learns of a new namespace on its
// next cache refresh).
func (s *Server) CreateNamespace(ctx context.Context, ns string, attrs map[string]enumspb.IndexedValueType) error {
	cl, err := s.Dial(ctx, "default")
	if err != nil {
		return err
	}
	defer cl.Close()
	return createNamespace(ctx, cl, ns, attrs)
}

// lastLines is the last n lines of s, for an error that quotes a
// child's stderr without all of it.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
