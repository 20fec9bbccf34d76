// Package pgtemporal runs the real Temporal server (go.temporal.io/server:
// frontend, history, matching and worker services in one process) on a
// throwaway PostgreSQL (internal/pgtest), as a child process that can be
// stopped, killed and started again on the same ports and databases: the
// production shape of docker-compose.yml, on one machine, for the chaos
// suite's -cluster mode.
//
// The child is the calling program itself, started again with ServeEnv
// set: a program that uses Cluster calls ServeIfChild first thing in its
// main (or TestMain), so no second 200 MB binary is built.
//
// integration/cluster has its own copy of this shape (with TLS and API-key
// authentication for its secure tests); this one is the plain cluster.
package pgtemporal

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
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
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
)

// ServeEnv names the spec file of a child that is to run the Temporal
// server instead of the program's own main.
const ServeEnv = "SANDBOT_PGTEMPORAL_SERVE"

// ServeIfChild runs the Temporal server and exits when the process is a
// server child (ServeEnv is set); otherwise it returns at once.
func ServeIfChild() {
	if spec := os.Getenv(ServeEnv); spec != "" {
		serve(spec)
	}
}

// spec is what the server child needs: where its databases are and which
// ports it listens on, the same across restarts.
type spec struct {
	DB, VisibilityDB                                  string
	Frontend, FrontendHTTP, History, Matching, Worker int
	Shards                                            int
}

func (s spec) frontendAddr() string { return "127.0.0.1:" + strconv.Itoa(s.Frontend) }

// sqlConfig turns a postgres://user:password@host:port/db URL into the
// server's SQL store config.
func sqlConfig(raw string) (*config.SQL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "postgres" || u.Host == "" || len(u.Path) < 2 {
		return nil, errors.New("not a postgres://user:password@host:port/database URL")
	}
	pw, _ := u.User.Password()
	return &config.SQL{
		PluginName: postgresql.PluginName, DatabaseName: strings.TrimPrefix(u.Path, "/"),
		ConnectAddr: u.Host, ConnectProtocol: "tcp", User: u.User.Username(), Password: pw,
		MaxConns: 20, MaxIdleConns: 20, MaxConnLifetime: time.Hour,
	}, nil
}

// serverConfig is a single-node cluster on two PostgreSQL databases (the
// default store and visibility), membership static.
func serverConfig(s spec) (*config.Config, map[primitives.ServiceName]static.Hosts, error) {
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
			DefaultStore: "default", VisibilityStore: "visibility", NumHistoryShards: int32(s.Shards),
			DataStores: map[string]config.DataStore{"default": {SQL: def}, "visibility": {SQL: vis}},
		},
		ClusterMetadata: &cluster.Config{
			FailoverVersionIncrement: 10, MasterClusterName: name, CurrentClusterName: name,
			ClusterInformation: map[string]cluster.ClusterInformation{name: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: front}},
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
	local := func(port int) static.Hosts { return static.SingleLocalHost("127.0.0.1:" + strconv.Itoa(port)) }
	hosts := map[primitives.ServiceName]static.Hosts{
		primitives.FrontendService: local(s.Frontend), primitives.HistoryService: local(s.History),
		primitives.MatchingService: local(s.Matching), primitives.WorkerService: local(s.Worker),
	}
	return cfg, hosts, nil
}

// serve is the server child's main: start the server, say "ready" on
// stdout, run until SIGTERM or SIGINT.
func serve(specPath string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "temporal server:", err)
		os.Exit(1)
	}
	b, err := os.ReadFile(specPath)
	if err != nil {
		fail(err)
	}
	var sp spec
	if err := json.Unmarshal(b, &sp); err != nil {
		fail(err)
	}
	cfg, hosts, err := serverConfig(sp)
	if err != nil {
		fail(err)
	}
	logger := log.NewZapLogger(log.BuildZapLogger(log.Config{Level: "warn", Format: "console"}))
	dc := dynamicconfig.StaticClient{
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
		// One partition per task queue, as in cmd/dev.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorization.NewNoopAuthorizer()),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return authorization.NewNoopClaimMapper() }),
		temporal.WithDynamicConfigClient(dc),
	)
	if err != nil {
		fail(err)
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
// versioned), from the schema embedded in the server module.
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

// Cluster is one Temporal cluster: a throwaway PostgreSQL with the two
// databases, and the Temporal server as a child process.
type Cluster struct {
	pg   *pgtest.Server
	spec spec
	dir  string
	log  *os.File

	mu     sync.Mutex
	proc   *exec.Cmd
	exited chan struct{}
}

// New creates the databases in a new PostgreSQL, sets up the schema and
// starts the server; dir holds its spec files and log (temporal.log).
// Close it.
func New(dir string) (*Cluster, error) {
	bin, err := pgtest.BinDir()
	if err != nil {
		return nil, err
	}
	pg, err := pgtest.New(bin, pgtest.Options{User: "temporal"})
	if err != nil {
		return nil, err
	}
	c := &Cluster{pg: pg, dir: dir}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	dbURL := func(name string) string {
		return (&url.URL{Scheme: "postgres", User: url.UserPassword(pg.User, pg.Password), Host: pg.Addr(), Path: "/" + name}).String()
	}
	c.spec = spec{DB: dbURL("temporal"), VisibilityDB: dbURL("temporal_visibility"), Shards: 4}
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
	if c.log, err = os.Create(filepath.Join(dir, "temporal.log")); err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

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
func (c *Cluster) HostPort() string { return c.spec.frontendAddr() }

// Postgres is the cluster's PostgreSQL server (restartable).
func (c *Cluster) Postgres() *pgtest.Server { return c.pg }

// run starts a server child and waits until it is ready or has exited.
func (c *Cluster) run() (*exec.Cmd, chan struct{}, string, error) {
	b, err := json.Marshal(c.spec)
	if err != nil {
		return nil, nil, "", err
	}
	specPath := filepath.Join(c.dir, "server.json")
	if err := os.WriteFile(specPath, b, 0o600); err != nil {
		return nil, nil, "", err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, "", err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), ServeEnv+"="+specPath)
	var stderr syncBuffer
	cmd.Stderr = io.MultiWriter(c.log, &stderr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, "", err
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
		return cmd, exited, stderr.String(), fmt.Errorf("temporal server exited at start: %s", lastLines(stderr.String(), 5))
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		<-exited
		return cmd, exited, stderr.String(), errors.New("temporal server not ready after 3 minutes")
	}
}

// Start starts the server (again, after Stop or Kill) on the same ports
// and databases.
func (c *Cluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		return errors.New("temporal server already running")
	}
	// A fixed port can be taken for a moment while the server is down
	// (another process's outgoing connection): try again a few times.
	for attempt := 1; ; attempt++ {
		cmd, exited, stderr, err := c.run()
		if err == nil {
			c.proc, c.exited = cmd, exited
			return nil
		}
		if attempt == 5 || !strings.Contains(stderr, "address already in use") {
			return err
		}
		time.Sleep(time.Second)
	}
}

// Stop stops the server cleanly (SIGTERM) and waits for it.
func (c *Cluster) Stop() { c.signal(syscall.SIGTERM) }

// Kill kills the server (SIGKILL), as a crash would.
func (c *Cluster) Kill() { c.signal(syscall.SIGKILL) }

func (c *Cluster) signal(sig syscall.Signal) {
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
func (c *Cluster) Close() {
	c.Kill()
	if c.pg != nil {
		_ = c.pg.Close()
	}
	if c.log != nil {
		_ = c.log.Close()
	}
}

// CreateNamespace registers ns with the search attributes given and waits
// until both are usable (the frontend learns of a new namespace on its
// next cache refresh).
func (c *Cluster) CreateNamespace(ctx context.Context, ns string, attrs map[string]enumspb.IndexedValueType) error {
	cl, err := client.DialContext(ctx, client.Options{HostPort: c.HostPort(), Namespace: "default", Logger: quiet{}})
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = cl.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace %s: %w", ns, err)
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	query := ""
	if len(names) > 0 {
		query = strings.Join(names, " IS NULL AND ") + " IS NULL"
	}
	added := len(attrs) == 0
	var last error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if !added {
			_, last = cl.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: ns, SearchAttributes: attrs})
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
	return fmt.Errorf("namespace %s with search attributes not usable after two minutes: %w", ns, last)
}

// LogTail is the end of the server's log.
func (c *Cluster) LogTail(n int) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "temporal.log"))
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}

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

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
