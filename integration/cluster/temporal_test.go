package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5" // #nosec: the schema tool records manifest checksums as md5
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence"
	"go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/common/resolver"
	"go.temporal.io/server/schema"
	"go.temporal.io/server/temporal"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sandbot/sandbot/internal/pgtest"
	"github.com/sandbot/sandbot/session"
)

// This file is the cluster's Temporal side: the real Temporal server
// (go.temporal.io/server, the same services as the production image) on
// PostgreSQL, run as a child process so that killing and restarting it is
// real. The child is this test binary itself, started with serveEnv set
// (see TestMain): no second 200 MB binary to build.

// serveEnv names the server spec file for a child that is to run the
// Temporal server instead of the tests.
const serveEnv = "CLUSTERTEST_TEMPORAL_SERVE"

// serverSpec is everything the server child needs: where its databases
// are and which ports it listens on. The ports stay the same across
// restarts, so clients reconnect to the same address.
type serverSpec struct {
	// DB and VisibilityDB are postgres:// URLs of the two stores.
	DB, VisibilityDB                                  string
	Frontend, FrontendHTTP, History, Matching, Worker int
	Shards                                            int
	// Secure, when set, makes the frontend authenticate its callers
	// (secure_test.go).
	Secure *secureSpec `json:",omitempty"`
}

func (s serverSpec) frontendAddr() string { return "127.0.0.1:" + strconv.Itoa(s.Frontend) }

// sqlConfig turns a postgres://user:password@host:port/db URL into the
// server's SQL store config.
func sqlConfig(raw string) (*config.SQL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "postgres" || u.Host == "" || len(u.Path) < 2 {
		return nil, fmt.Errorf("%q is not a postgres://user:password@host:port/database URL", redactURL(raw))
	}
	pw, _ := u.User.Password()
	return &config.SQL{
		PluginName: postgresql.PluginName, DatabaseName: strings.TrimPrefix(u.Path, "/"),
		ConnectAddr: u.Host, ConnectProtocol: "tcp", User: u.User.Username(), Password: pw,
		MaxConns: 20, MaxIdleConns: 20, MaxConnLifetime: time.Hour,
	}, nil
}

// redactURL drops the password from a database URL, for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// serverConfig is a single-node cluster on two PostgreSQL databases, one for
// the default store and one for visibility, with membership static (all
// services in one process at known ports), as devserver does for SQLite.
func serverConfig(s serverSpec) (*config.Config, map[primitives.ServiceName]static.Hosts, error) {
	def, err := sqlConfig(s.DB)
	if err != nil {
		return nil, nil, fmt.Errorf("default store: %w", err)
	}
	vis, err := sqlConfig(s.VisibilityDB)
	if err != nil {
		return nil, nil, fmt.Errorf("visibility store: %w", err)
	}
	const name = "active"
	front := s.frontendAddr()
	service := func(port int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: port, BindOnLocalHost: true}}
	}
	frontend := service(s.Frontend)
	frontend.RPC.HTTPPort = s.FrontendHTTP
	cfg := &config.Config{
		Persistence: config.Persistence{
			DefaultStore:     "default",
			VisibilityStore:  "visibility",
			NumHistoryShards: int32(s.Shards),
			DataStores:       map[string]config.DataStore{"default": {SQL: def}, "visibility": {SQL: vis}},
		},
		ClusterMetadata: &cluster.Config{
			FailoverVersionIncrement: 10,
			MasterClusterName:        name,
			CurrentClusterName:       name,
			ClusterInformation:       map[string]cluster.ClusterInformation{name: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: front}},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{
			"frontend": frontend, "history": service(s.History), "matching": service(s.Matching), "worker": service(s.Worker),
		},
		Archival: config.Archival{History: config.HistoryArchival{State: "disabled"}, Visibility: config.VisibilityArchival{State: "disabled"}},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History: config.HistoryArchivalNamespaceDefaults{State: "disabled"}, Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
		}},
		PublicClient: config.PublicClient{HostPort: front},
	}
	if s.Secure != nil {
		s.Secure.applyTLS(cfg)
	}
	local := func(port int) static.Hosts { return static.SingleLocalHost("127.0.0.1:" + strconv.Itoa(port)) }
	hosts := map[primitives.ServiceName]static.Hosts{
		primitives.FrontendService: local(s.Frontend), primitives.HistoryService: local(s.History),
		primitives.MatchingService: local(s.Matching), primitives.WorkerService: local(s.Worker),
	}
	return cfg, hosts, nil
}

// serve is the server child's main: start the server, say "ready" on
// stdout, run until SIGTERM or SIGINT. A start-up failure is printed to
// stderr and exits 1.
func serve(specPath string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "temporal server:", err)
		os.Exit(1)
	}
	b, err := os.ReadFile(specPath)
	if err != nil {
		fail(err)
	}
	var spec serverSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		fail(err)
	}
	cfg, hosts, err := serverConfig(spec)
	if err != nil {
		fail(err)
	}
	logger := log.NewZapLogger(log.BuildZapLogger(log.Config{Level: "warn", Format: "console"}))
	dc := dynamicconfig.StaticClient{
		// Search attributes added at namespace creation are usable at once.
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
		// One partition per task queue, as in cmd/dev: a poller and a task
		// always meet without forwarding between partitions.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
	}
	authorizer, claims := authorization.NewNoopAuthorizer(), authorization.NewNoopClaimMapper()
	if spec.Secure != nil {
		authorizer, claims = authorization.NewDefaultAuthorizer(), keyClaims{key: spec.Secure.APIKey}
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claims }),
		temporal.WithDynamicConfigClient(dc),
	)
	if err != nil {
		fail(fmt.Errorf("persistence %s, visibility %s: %w", redactURL(spec.DB), redactURL(spec.VisibilityDB), err))
	}
	if err := srv.Start(); err != nil {
		fail(fmt.Errorf("start: %w", err))
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	if err := srv.Stop(); err != nil {
		fail(fmt.Errorf("stop: %w", err))
	}
	os.Exit(0)
}

// setupSchema gives an empty database the Temporal schema the way
// temporal-sql-tool does (setup-schema -v 0.0, then update-schema -d
// versioned): the version tables, then every versioned directory of the
// schema embedded in the server module, in version order, recording each
// version. dir is "postgresql/v12/temporal" or "postgresql/v12/visibility".
func setupSchema(cfg *config.SQL, kind sqlplugin.DbKind, dir string) error {
	db, err := sql.NewSQLAdminDB(kind, cfg, resolver.NewNoopResolver(), log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.CreateSchemaVersionTables(); err != nil {
		return fmt.Errorf("version tables: %w", err)
	}
	if err := db.UpdateSchemaVersion(cfg.DatabaseName, "0.0", "0.0"); err != nil {
		return err
	}
	fsys := schema.Assets()
	versioned := path.Join(dir, "versioned")
	entries, err := fs.ReadDir(fsys, versioned)
	if err != nil {
		return err
	}
	var versions []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "v") {
			versions = append(versions, strings.TrimPrefix(e.Name(), "v"))
		}
	}
	sort.Slice(versions, func(i, j int) bool { return versionLess(versions[i], versions[j]) })
	cur := "0.0"
	for _, v := range versions {
		vdir := path.Join(versioned, "v"+v)
		raw, err := fs.ReadFile(fsys, path.Join(vdir, "manifest.json"))
		if err != nil {
			return err
		}
		var m struct {
			CurrVersion, MinCompatibleVersion, Description string
			SchemaUpdateCqlFiles                           []string
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("%s: %w", vdir, err)
		}
		var readers []io.Reader
		for _, f := range m.SchemaUpdateCqlFiles {
			b, err := fs.ReadFile(fsys, path.Join(vdir, f))
			if err != nil {
				return err
			}
			readers = append(readers, bytes.NewReader(b))
		}
		stmts, err := persistence.LoadAndSplitQueryFromReaders(readers)
		if err != nil {
			return fmt.Errorf("%s: %w", vdir, err)
		}
		for _, st := range stmts {
			if err := db.Exec(st); err != nil {
				return fmt.Errorf("schema %s v%s: %w", dir, v, err)
			}
		}
		sum := md5.Sum(raw) // #nosec: a checksum of the manifest, as the tool records
		if err := db.UpdateSchemaVersion(cfg.DatabaseName, m.CurrVersion, m.MinCompatibleVersion); err != nil {
			return err
		}
		if err := db.WriteSchemaUpdateLog(cur, m.CurrVersion, hex.EncodeToString(sum[:]), m.Description); err != nil {
			return err
		}
		cur = m.CurrVersion
	}
	if cur != db.ExpectedVersion() {
		return fmt.Errorf("schema %s ends at %s, the server expects %s", dir, cur, db.ExpectedVersion())
	}
	return nil
}

func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if x != y {
			return x < y
		}
	}
	return len(as) < len(bs)
}

// tcluster is one Temporal cluster: a throwaway PostgreSQL with the two
// databases, and the Temporal server as a child process.
type tcluster struct {
	pg   *pgtest.Server
	spec serverSpec
	dir  string
	log  *os.File

	mu     sync.Mutex
	proc   *exec.Cmd
	exited chan struct{}
}

// newCluster creates the databases, sets up the schema and starts the
// server. Close it.
func newCluster(dir string) (*tcluster, error) {
	bin, err := pgtest.BinDir()
	if err != nil {
		return nil, err
	}
	pg, err := pgtest.New(bin, pgtest.Options{User: "temporal"})
	if err != nil {
		return nil, err
	}
	c := &tcluster{pg: pg, dir: dir}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	dbURL := func(name string) string {
		return (&url.URL{Scheme: "postgres", User: url.UserPassword(pg.User, pg.Password), Host: pg.Addr(), Path: "/" + name}).String()
	}
	c.spec = serverSpec{DB: dbURL("temporal"), VisibilityDB: dbURL("temporal_visibility"), Shards: 4}
	for _, st := range []struct {
		url, dir string
		kind     sqlplugin.DbKind
	}{{c.spec.DB, "postgresql/v12/temporal", sqlplugin.DbKindMain}, {c.spec.VisibilityDB, "postgresql/v12/visibility", sqlplugin.DbKindVisibility}} {
		cfg, _ := sqlConfig(st.url)
		if err := pg.CreateDatabase(cfg.DatabaseName); err != nil {
			return nil, err
		}
		if err := setupSchema(cfg, st.kind, st.dir); err != nil {
			return nil, fmt.Errorf("schema of %s: %w", cfg.DatabaseName, err)
		}
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	c.spec.Frontend, c.spec.FrontendHTTP, c.spec.History, c.spec.Matching, c.spec.Worker = ports[0], ports[1], ports[2], ports[3], ports[4]
	if c.log, err = os.Create(path.Join(dir, "temporal.log")); err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// freePorts returns n distinct free ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// HostPort is the frontend address.
func (c *tcluster) HostPort() string { return c.spec.frontendAddr() }

// runServer starts a server child with spec and waits until it is ready
// or has exited; it returns the child, a channel closed when it exits,
// and, if it exited, what it said on stderr.
func runServer(spec serverSpec, dir string, logTo io.Writer) (*exec.Cmd, chan struct{}, *bytes.Buffer, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, nil, nil, err
	}
	specPath := path.Join(dir, fmt.Sprintf("server-%d.json", time.Now().UnixNano()))
	if err := os.WriteFile(specPath, b, 0o600); err != nil {
		return nil, nil, nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), serveEnv+"="+specPath)
	stderr := &syncBuffer{}
	cmd.Stderr = io.MultiWriter(logTo, stderr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, err
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
			return cmd, exited, nil, nil
		}
		<-exited
		return cmd, exited, stderr.Buffer(), fmt.Errorf("temporal server exited at start: %s", lastLines(stderr.String(), 5))
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		<-exited
		return cmd, exited, stderr.Buffer(), errors.New("temporal server not ready after 3 minutes")
	}
}

// Start starts the server (again, after Stop or Kill).
func (c *tcluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		return errors.New("temporal server already running")
	}
	// The ports are fixed (clients reconnect to the same address), and a
	// port can be taken while the server is down by another process's
	// outgoing connection; that passes, so try again a few times.
	var cmd *exec.Cmd
	var exited chan struct{}
	for attempt := 1; ; attempt++ {
		var stderr *bytes.Buffer
		var err error
		cmd, exited, stderr, err = runServer(c.spec, c.dir, c.log)
		if err == nil {
			break
		}
		if attempt == 5 || stderr == nil || !strings.Contains(stderr.String(), "address already in use") {
			return err
		}
		time.Sleep(time.Second)
	}
	c.proc, c.exited = cmd, exited
	return nil
}

// Stop stops the server cleanly (SIGTERM) and waits for it.
func (c *tcluster) Stop() { c.signal(syscall.SIGTERM) }

// Kill kills the server (SIGKILL), as a crash or an OOM kill would.
func (c *tcluster) Kill() { c.signal(syscall.SIGKILL) }

func (c *tcluster) signal(sig syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return
	}
	_ = c.proc.Process.Signal(sig)
	select {
	case <-c.exited:
	case <-time.After(time.Minute):
		_ = c.proc.Process.Kill()
		<-c.exited
	}
	c.proc = nil
}

// Close stops the server and PostgreSQL and removes the database files.
func (c *tcluster) Close() {
	c.Kill()
	if c.pg != nil {
		_ = c.pg.Close()
	}
	if c.log != nil {
		_ = c.log.Close()
	}
}

// LogTail is the end of the server's log.
func (c *tcluster) LogTail(n int) string {
	b, _ := os.ReadFile(path.Join(c.dir, "temporal.log"))
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Dial connects a client to namespace ns.
func (c *tcluster) Dial(ctx context.Context, ns string) (client.Client, error) {
	return client.DialContext(ctx, client.Options{HostPort: c.HostPort(), Namespace: ns, Logger: quietSDK()})
}

// quietSDK is an SDK logger that keeps warnings and errors, on stderr with
// SANDBOT_TEST_LOG set and nowhere otherwise.
func quietSDK() sdklog.Logger {
	h := slog.DiscardHandler
	if os.Getenv("SANDBOT_TEST_LOG") != "" {
		h = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	}
	return sdklog.NewStructuredLogger(slog.New(h))
}

// CreateNamespace registers ns with sandbot's search attributes and waits
// until both are usable: the frontend learns about a new namespace on its
// next cache refresh.
func (c *tcluster) CreateNamespace(ctx context.Context, ns string) error {
	cl, err := c.Dial(ctx, "default")
	if err != nil {
		return err
	}
	defer cl.Close()
	return createNamespace(ctx, cl, ns)
}

// createNamespace registers ns through cl, as CreateNamespace.
func createNamespace(ctx context.Context, cl client.Client, ns string) error {
	_, err := cl.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace %s: %w", ns, err)
	}
	want := session.SearchAttributeTypes()
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	query := strings.Join(names, " IS NULL AND ") + " IS NULL"
	added := false
	var last error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if !added {
			_, last = cl.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: ns, SearchAttributes: want})
			var already *serviceerror.AlreadyExists
			if last != nil && !errors.As(last, &already) {
				continue // the namespace is not known to the frontend yet
			}
			added = true
		}
		if _, last = cl.WorkflowService().CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: ns, Query: query}); last == nil {
			return nil
		}
	}
	return fmt.Errorf("namespace %s with search attributes not usable after a minute: %w", ns, last)
}

// syncBuffer is a bytes.Buffer safe for a writer and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Buffer() *bytes.Buffer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.NewBufferString(s.b.String())
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
