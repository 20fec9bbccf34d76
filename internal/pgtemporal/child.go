package pgtemporal

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/temporal"
)

// This file is the server child's side: the spec file it is handed, and
// the server it runs from it.

// childSpec is everything the server child needs: where its databases are,
// which ports it listens on (the same across restarts) and whether it
// authenticates its callers.
type childSpec struct {
	Databases
	Frontend, FrontendHTTP, History, Matching, Worker int
	Shards                                            int
	Secure                                            *Secure `json:",omitempty"`
}

func (s childSpec) frontendAddr() string { return "127.0.0.1:" + strconv.Itoa(s.Frontend) }

// sqlConfig turns a postgres://user:password@host:port/db URL into the
// server's SQL store config.
func sqlConfig(raw string) (*config.SQL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "postgres" || u.Host == "" || len(u.Path) < 2 {
		return nil, fmt.Errorf("%q is not a postgres://user:password@host:port/database URL", RedactURL(raw))
	}
	pw, _ := u.User.Password()
	return &config.SQL{
		PluginName: postgresql.PluginName, DatabaseName: strings.TrimPrefix(u.Path, "/"),
		ConnectAddr: u.Host, ConnectProtocol: "tcp", User: u.User.Username(), Password: pw,
		MaxConns: 20, MaxIdleConns: 20, MaxConnLifetime: time.Hour,
	}, nil
}

// RedactURL is a database URL with its password replaced by "xxxxx", as
// the server child's start-up errors name a store.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// serverConfig is a single-node cluster on two PostgreSQL databases, one
// for the default store and one for visibility, with membership static
// (all services in one process at known ports), as devserver does for
// SQLite.
func serverConfig(s childSpec) (*config.Config, map[primitives.ServiceName]static.Hosts, error) {
	def, err := sqlConfig(s.Main)
	if err != nil {
		return nil, nil, fmt.Errorf("default store: %w", err)
	}
	vis, err := sqlConfig(s.Visibility)
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

// applyTLS makes the frontend require TLS with client certificates, and
// gives the system worker its certificate to call the frontend with.
func (s *Secure) applyTLS(cfg *config.Config) {
	client := config.ClientTLS{RootCAFiles: []string{s.CA}}
	cfg.Global.TLS.Frontend = config.GroupTLS{
		Server: config.ServerTLS{CertFile: s.Cert, KeyFile: s.Key, ClientCAFiles: []string{s.CA}, RequireClientAuth: true},
		Client: client,
	}
	cfg.Global.TLS.SystemWorker = config.WorkerTLS{CertFile: s.SystemCert, KeyFile: s.SystemKey, Client: client}
}

// keyClaims grants admin to a caller with the API key and to the system
// worker's certificate; a wrong key is an error (the frontend answers
// "Request unauthorized"), and a caller with neither gets no claims, which
// the default authorizer refuses.
type keyClaims struct{ key string }

func (k keyClaims) GetClaims(a *authorization.AuthInfo) (*authorization.Claims, error) {
	switch {
	case a.AuthToken != "":
		if a.AuthToken != "Bearer "+k.key {
			return nil, errors.New("wrong API key")
		}
		return &authorization.Claims{Subject: "sandbot", System: authorization.RoleAdmin}, nil
	case a.TLSSubject != nil && a.TLSSubject.CommonName == SystemWorkerCN:
		return &authorization.Claims{Subject: SystemWorkerCN, System: authorization.RoleAdmin}, nil
	}
	return nil, nil
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
	var spec childSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		fail(fmt.Errorf("spec %s: %w", specPath, err))
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
	var authorizer authorization.Authorizer = authorization.NewNoopAuthorizer()
	var claims authorization.ClaimMapper = authorization.NewNoopClaimMapper()
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
		fail(fmt.Errorf("persistence %s, visibility %s: %w", RedactURL(spec.Main), RedactURL(spec.Visibility), err))
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
