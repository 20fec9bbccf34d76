// Package pgtest runs a throwaway PostgreSQL server for tests: its own data
// directory in a temporary directory, its own port on 127.0.0.1 and unix
// socket, password authentication over TCP, and nothing shared with a
// PostgreSQL the machine may already run. It uses the server binaries of
// Debian's postgresql package (/usr/lib/postgresql/<version>/bin, the
// newest version installed; PGTEST_BINDIR names another directory).
//
// PostgreSQL refuses to run as root, so when the test runs as root the
// server runs as the "postgres" system user (Debian's package creates it;
// else "nobody"); otherwise it runs as the test's own user. The server is a
// child of the test process and dies with it.
package pgtest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandbot/sandbot/internal/freeport"
)

// Install is what to run when the binaries are missing.
const Install = "apt-get install -y postgresql"

// BinDir returns the directory of the newest installed PostgreSQL server
// binaries (initdb, postgres, pg_isready, psql).
func BinDir() (string, error) {
	if dir := os.Getenv("PGTEST_BINDIR"); dir != "" {
		return dir, checkBin(dir)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if checkBin(d) == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		d := filepath.Dir(p)
		return d, checkBin(d)
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (initdb, postgres) in /usr/lib/postgresql/*/bin or on PATH; install them with `%s`", Install)
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func checkBin(dir string) error {
	for _, b := range []string{"initdb", "postgres", "pg_isready", "psql"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("PostgreSQL binaries in %s: %w (install them with `%s`)", dir, err, Install)
		}
	}
	return nil
}

// Require returns the binary directory. Without PostgreSQL it skips the
// test, except under CI=true, where it fails: CI installs PostgreSQL
// (.ci/run) and must run these tests.
func Require(t testing.TB) string {
	t.Helper()
	dir, err := BinDir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: the PostgreSQL tests must run; .ci/run installs postgresql)", err)
		}
		t.Skipf("%v; skipping (with CI=true this fails instead)", err)
	}
	return dir
}

// Server is a running throwaway PostgreSQL. Its methods are safe for
// concurrent use.
type Server struct {
	// Host and Port are where it listens for TCP connections.
	Host string
	Port int
	// User is the superuser, authenticated by Password over TCP.
	User, Password string

	bin  string
	base string // owned by the server's user: data/, log, pw
	cred *syscall.Credential

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// Options configure Start.
type Options struct {
	// User is the superuser's name. Default "postgres".
	User string
	// Password is the superuser's password. Default: random.
	Password string
}

// Start creates a new database cluster and starts its server. The server is
// stopped and its files removed when the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin := Require(t)
	s, err := New(bin, o)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Logf("pgtest: %v", err)
		}
	})
	return s
}

// New is Start without a test: it creates and starts a server with the
// binaries in bin (see BinDir). The caller closes it.
func New(bin string, o Options) (*Server, error) {
	if o.User == "" {
		o.User = "postgres"
	}
	if o.Password == "" {
		o.Password = strings.ToLower(rand.Text())
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{Host: "127.0.0.1", User: o.User, Password: o.Password, bin: bin, base: base, cred: cred}
	ok := false
	defer func() {
		if !ok {
			_ = s.Close()
		}
	}()
	if cred != nil {
		if err := os.Chown(base, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	pw := filepath.Join(base, "pw")
	if err := s.writeFile(pw, o.Password+"\n"); err != nil {
		return nil, err
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", s.dataDir(), "-U", o.User, "--pwfile="+pw,
		"--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := s.run(initdb); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	// PostgreSQL is restarted on this port (the chaos suite's
	// PostgreSQL restarts), so it is drawn below the ephemeral range.
	ports, err := freeport.Ports(1)
	if err != nil {
		return nil, err
	}
	s.Port = ports[0]
	// Throwaway data: durability against power loss is not wanted, speed
	// is (no fsync). Every commit is still written to the WAL before it
	// is acknowledged (synchronous_commit stays on), so a crash of the
	// server itself (Kill) loses nothing a client was told was committed:
	// the operating system keeps what was written.
	conf := fmt.Sprintf("\nlisten_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\n"+
		"fsync = off\nfull_page_writes = off\nmax_connections = 300\nshared_buffers = 32MB\n"+
		"log_min_messages = warning\n", s.Port, base)
	f, err := os.OpenFile(filepath.Join(s.dataDir(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(conf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if s.log, err = os.OpenFile(filepath.Join(base, "log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// serverUser is the user the server runs as: nil (the current user) unless
// the test runs as root.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as (it refuses root)")
}

func (s *Server) dataDir() string { return filepath.Join(s.base, "data") }

func (s *Server) writeFile(path, content string) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return err
	}
	if s.cred != nil {
		return os.Chown(path, int(s.cred.Uid), int(s.cred.Gid))
	}
	return nil
}

func (s *Server) prepare(cmd *exec.Cmd) {
	cmd.Dir = s.base
	cmd.Env = []string{"PATH=" + s.bin + ":/usr/bin:/bin", "LC_ALL=C", "TZ=UTC"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
}

func (s *Server) run(cmd *exec.Cmd) (string, error) {
	s.prepare(cmd)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Start starts the server again after Stop or Kill (Start starts it the
// first time). It returns once the server accepts connections.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("pgtest: already running")
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.dataDir())
	s.prepare(cmd)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(time.Minute)
	for {
		ready := exec.Command(filepath.Join(s.bin, "pg_isready"), "-q", "-h", s.Host, "-p", strconv.Itoa(s.Port), "-U", s.User, "-d", "postgres")
		if _, err := s.run(ready); err == nil {
			return nil
		}
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("pgtest: postgres exited at start:\n%s", s.LogTail(2000))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres not ready after a minute:\n%s", s.LogTail(2000))
		}
	}
}

// Stop shuts the server down cleanly (a fast shutdown: sessions are
// disconnected, everything is flushed) and waits for it to exit.
func (s *Server) Stop() error { return s.signal(syscall.SIGINT) }

// Kill stops the server the hard way (an immediate shutdown: no flush, the
// next start runs crash recovery), as a crash would.
func (s *Server) Kill() error { return s.signal(syscall.SIGQUIT) }

// Restart is Stop then Start.
func (s *Server) Restart() error {
	if err := s.Stop(); err != nil {
		return err
	}
	return s.Start()
}

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
	return nil
}

// CreateDatabase creates a database owned by the superuser.
func (s *Server) CreateDatabase(name string) error {
	_, err := s.SQL("postgres", fmt.Sprintf(`CREATE DATABASE "%s"`, strings.ReplaceAll(name, `"`, `""`)))
	return err
}

// SQL runs statements in database db with psql over TCP, as the superuser,
// and returns what psql printed (unaligned, tuples only).
func (s *Server) SQL(db, statements string) (string, error) {
	cmd := exec.Command(filepath.Join(s.bin, "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
		"-h", s.Host, "-p", strconv.Itoa(s.Port), "-U", s.User, "-d", db, "-c", statements)
	s.prepare(cmd)
	cmd.Env = append(cmd.Env, "PGPASSWORD="+s.Password)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("pgtest: psql %q: %w: %s", statements, err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

// Addr is host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// LogTail returns the last n bytes of the server's log.
func (s *Server) LogTail(n int) string {
	b, _ := os.ReadFile(filepath.Join(s.base, "log"))
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Close stops the server at once and removes its files.
func (s *Server) Close() error {
	err := s.Kill()
	if s.log != nil {
		_ = s.log.Close()
	}
	if rerr := os.RemoveAll(s.base); err == nil {
		err = rerr
	}
	return err
}
