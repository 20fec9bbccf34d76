package devserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/common/primitives/timestamp"
	"go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

const (
	clusterName = "active"
	loopback    = "127.0.0.1"
)

// ports are the listening ports of one server: gRPC for each of the four services, and the
// frontend's HTTP API.
type ports struct {
	frontend, frontendHTTP, history, matching, worker int
}

// pickPorts checks that the requested frontend port is free (0 picks one) and picks free
// ports for everything else. All listeners are held open until every port is chosen, so the
// ports are distinct; they are released just before the server binds them.
func pickPorts(ip string, frontend int) (ports, error) {
	var p ports
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	listen := func(host string, port int) (int, error) {
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return 0, err
		}
		held = append(held, l)
		return l.Addr().(*net.TCPAddr).Port, nil
	}

	var err error
	if p.frontend, err = listen(ip, frontend); err != nil {
		return p, fmt.Errorf("devserver: frontend port %d on %s is not available (0 picks a free port): %w", frontend, ip, err)
	}
	if p.frontendHTTP, err = listen(ip, 0); err != nil {
		return p, fmt.Errorf("devserver: pick a free port: %w", err)
	}
	for _, dst := range []*int{&p.history, &p.matching, &p.worker} {
		if *dst, err = listen(loopback, 0); err != nil {
			return p, fmt.Errorf("devserver: pick a free port: %w", err)
		}
	}
	return p, nil
}

// buildConfig is a single-node cluster with one history shard on SQLite, without metrics,
// pprof or archival. Membership is static (see staticHosts), so no gossip ports are needed.
func buildConfig(o Options, p ports) *config.Config {
	sqlCfg := &config.SQL{
		PluginName:        sqliteplugin.PluginName,
		DatabaseName:      o.DBPath,
		ConnectAttributes: map[string]string{"mode": "rwc"},
	}
	if o.Ephemeral {
		// A random name keeps concurrent ephemeral servers in one process apart: the SQLite
		// plugin shares connections by DSN.
		sqlCfg.DatabaseName = "devserver-" + randomHex(8)
		sqlCfg.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
	}
	frontendAddr := clientHostPort(o.IP, p.frontend)

	service := func(grpcPort int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: grpcPort, BindOnLocalHost: true}}
	}
	frontend := service(p.frontend)
	frontend.RPC.HTTPPort = p.frontendHTTP
	if o.IP != loopback {
		frontend.RPC.BindOnLocalHost = false
		frontend.RPC.BindOnIP = o.IP
	}

	return &config.Config{
		Persistence: config.Persistence{
			DefaultStore:     sqliteplugin.PluginName,
			VisibilityStore:  sqliteplugin.PluginName,
			NumHistoryShards: 1,
			DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlCfg}},
		},
		ClusterMetadata: &cluster.Config{
			EnableGlobalNamespace:    false,
			FailoverVersionIncrement: 10,
			MasterClusterName:        clusterName,
			CurrentClusterName:       clusterName,
			ClusterInformation: map[string]cluster.ClusterInformation{
				clusterName: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontendAddr},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{
			"frontend": frontend,
			"history":  service(p.history),
			"matching": service(p.matching),
			"worker":   service(p.worker),
		},
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{
			Archival: config.ArchivalNamespaceDefaults{
				History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
				Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
			},
		},
		// The server's internal workers (system workflows) dial the frontend through this.
		PublicClient: config.PublicClient{HostPort: frontendAddr},
	}
}

func sqliteConfig(cfg *config.Config) *config.SQL {
	return cfg.Persistence.DataStores[sqliteplugin.PluginName].SQL
}

// staticHosts replaces gossip membership: all services live in this process at known
// addresses. With gossip, a restart on the same database would first try to join the previous
// run's members (recorded in the database, now dead) and stall for up to a minute.
func staticHosts(o Options, p ports) map[primitives.ServiceName]static.Hosts {
	return map[primitives.ServiceName]static.Hosts{
		primitives.FrontendService: static.SingleLocalHost(clientHostPort(o.IP, p.frontend)),
		primitives.HistoryService:  static.SingleLocalHost(net.JoinHostPort(loopback, strconv.Itoa(p.history))),
		primitives.MatchingService: static.SingleLocalHost(net.JoinHostPort(loopback, strconv.Itoa(p.matching))),
		primitives.WorkerService:   static.SingleLocalHost(net.JoinHostPort(loopback, strconv.Itoa(p.worker))),
	}
}

func serverOptions(cfg *config.Config, hosts map[primitives.ServiceName]static.Hosts, dyn dynamicconfig.StaticClient, logger log.Logger) []temporal.ServerOption {
	return []temporal.ServerOption{
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorization.NewNoopAuthorizer()),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return authorization.NewNoopClaimMapper() }),
		temporal.WithDynamicConfigClient(dyn),
	}
}

// ensureSchema gives a new database file the Temporal schema. The schema is written to a
// temporary file that is renamed into place, so an interrupted first start never leaves a
// half-built database behind that every later start would trip over.
func ensureSchema(path string, sqlCfg *config.SQL) error {
	info, err := os.Stat(path)
	switch {
	case err == nil && info.Size() > 0:
		return nil // an existing database; the server checks it on start
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("devserver: DBPath: %w", err)
	}

	tmp := fmt.Sprintf("%s.init-%s", path, randomHex(4))
	tmpCfg := *sqlCfg
	tmpCfg.DatabaseName = tmp
	tmpCfg.ConnectAttributes = map[string]string{"mode": "rwc"}
	// Created private before SQLite opens it, so the database is never
	// readable by others, not even while its schema is written.
	if err := createPrivate(tmp); err != nil {
		return fmt.Errorf("devserver: create schema in %s: %w", path, err)
	}
	if err := sqlite.SetupSchema(&tmpCfg); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("devserver: create schema in %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("devserver: create schema in %s: %w", path, err)
	}
	return nil
}

// createNamespace registers the namespace, with the search attributes, straight in the
// database if it does not exist yet; an existing namespace is left as it is (missing search
// attributes are added later through the operator API).
func createNamespace(sqlCfg *config.SQL, activeCluster string, o Options) error {
	ns, err := sqlite.NewNamespaceConfig(activeCluster, o.Namespace, false, o.SearchAttributes)
	if err != nil {
		return fmt.Errorf("devserver: namespace %s: %w", o.Namespace, err)
	}
	ns.Detail.Config.Retention = timestamp.DurationPtr(o.Retention)
	if err := sqlite.CreateNamespaces(sqlCfg, ns); err != nil {
		return fmt.Errorf("devserver: create namespace %s: %w", o.Namespace, err)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}
