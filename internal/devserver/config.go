package devserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives/timestamp"
	"go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

const (
	clusterName = "active"
	loopback    = "127.0.0.1"
)

// ports are the listening ports of one server: a gRPC and a membership (gossip) port for each
// of the four services.
type ports struct {
	frontend, history, matching, worker int
	membership                          [4]int
}

// pickPorts checks that the requested frontend port is free (0 picks one) and picks free
// loopback ports for everything else. All listeners are held open until every port is chosen,
// so the ports are distinct; they are released just before the server binds them.
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
	others := []*int{&p.history, &p.matching, &p.worker, &p.membership[0], &p.membership[1], &p.membership[2], &p.membership[3]}
	for _, dst := range others {
		if *dst, err = listen(loopback, 0); err != nil {
			return p, fmt.Errorf("devserver: pick a free port: %w", err)
		}
	}
	return p, nil
}

// buildConfig is a single-node cluster with one history shard on SQLite, without metrics,
// pprof, archival or the HTTP API (the UI and the SDK use gRPC).
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

	service := func(grpcPort, membershipPort int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: grpcPort, MembershipPort: membershipPort, BindOnLocalHost: true}}
	}
	frontend := service(p.frontend, p.membership[0])
	if o.IP != loopback {
		frontend.RPC.BindOnLocalHost = false
		frontend.RPC.BindOnIP = o.IP
	}

	return &config.Config{
		Global: config.Global{
			Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: loopback},
		},
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
			"history":  service(p.history, p.membership[1]),
			"matching": service(p.matching, p.membership[2]),
			"worker":   service(p.worker, p.membership[3]),
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

func serverOptions(cfg *config.Config, dyn dynamicconfig.StaticClient, logger log.Logger) []temporal.ServerOption {
	return []temporal.ServerOption{
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
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
	case err == nil && info.IsDir():
		return fmt.Errorf("devserver: DBPath %s is a directory; give a file path such as %s", path, filepath.Join(path, "temporal.db"))
	case err == nil && info.Size() > 0:
		return nil // an existing database; the server checks it on start
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("devserver: DBPath: %w", err)
	}

	tmp := fmt.Sprintf("%s.init-%s", path, randomHex(4))
	tmpCfg := *sqlCfg
	tmpCfg.DatabaseName = tmp
	tmpCfg.ConnectAttributes = map[string]string{"mode": "rwc"}
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
