// Package devserver runs a single-process Temporal server for cmd/dev and for integration tests.
//
// The server keeps its state in a SQLite file, so sessions (long-lived workflows) survive a
// restart of cmd/dev: start it again on the same DBPath and every running workflow carries on
// where it stopped. Ephemeral mode keeps the database in memory for tests. The namespace and the
// custom search attributes used for session discovery are created on start, and starting again
// when they already exist is fine.
//
// With Options.UIPort set, the Temporal Web UI is served too (assets embedded, no internet).
//
// Two things outlive Stop, because the server libraries offer no way to release them: the
// SQLite plugin keeps one connection per database for the life of the process (so an ephemeral
// database stays in memory), and the UI keeps an idle gRPC connection. That suits one dev
// process or one test binary; do not start hundreds of servers in one process.
//
// This package links go.temporal.io/server (about 450 modules, minutes of cold build and tens of
// seconds of link time per binary), so only cmd/dev and the one integration test package should
// import it. Everything else talks to Temporal through go.temporal.io/sdk/client.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/temporal"
)

// DefaultNamespace is the namespace created when Options.Namespace is empty.
const DefaultNamespace = "default"

// DefaultRetention is how long closed workflows are kept when Options.Retention is zero.
const DefaultRetention = 24 * time.Hour

// Options configures Start. The zero value is not valid: set DBPath, or Ephemeral for tests.
type Options struct {
	// DBPath is the SQLite file holding all server state. It is created (with its parent
	// directory) and given the Temporal schema on first start; later starts reuse it. Only one
	// Server may use a file at a time: a second Start on the same file, in this process or
	// another, fails instead of corrupting it.
	DBPath string
	// Ephemeral keeps the state in an in-memory SQLite database that vanishes with the process.
	// It excludes DBPath.
	Ephemeral bool

	// IP is the address the frontend gRPC service binds to. Default 127.0.0.1. The other
	// internal services always bind to 127.0.0.1.
	IP string
	// Port is the frontend gRPC port. 0 picks a free port. The internal services (history,
	// matching, worker and their membership ports) always get free ports.
	Port int

	// Namespace is created on first start. Default DefaultNamespace.
	Namespace string
	// Retention is how long closed workflows of a newly created namespace are kept. It has no
	// effect on a namespace that already exists. Default DefaultRetention.
	Retention time.Duration

	// SearchAttributes are custom search attributes registered in Namespace on every start:
	// missing ones are added, existing ones with the same type are left alone, and an existing
	// one with a different type is an error (a type cannot change in place). They are usable in
	// workflow starts and visibility queries as soon as Start returns.
	SearchAttributes map[string]enumspb.IndexedValueType

	// DynamicConfig overrides server dynamic config, keyed by the setting's name as in the
	// server's dynamic config YAML, e.g. "limit.historyCount.suggestContinueAsNew": 100 to see
	// continue-as-new suggested after a short history. Values apply to every namespace. Unknown
	// keys and values of the wrong type are rejected by Start.
	DynamicConfig map[string]any

	// Logger receives the server's warnings and errors (the server is very chatty below warn
	// level, so lower levels are dropped). Nil discards them.
	Logger *slog.Logger

	// UIPort, when non-zero, serves the Temporal Web UI at http://127.0.0.1:UIPort, pointed at
	// this server's frontend.
	UIPort int
}

// Server is a running embedded Temporal server. Its methods are safe for concurrent use.
type Server struct {
	srv       temporal.Server
	hostPort  string
	namespace string
	dbPath    string
	logger    *slog.Logger
	bridge    *serverLogger
	unlock    func()
	ui        *uiServer

	stopOnce sync.Once
	stopErr  error
}

// Start validates opts, prepares the database, starts the server and registers the namespace
// and search attributes. It returns once clients can connect and the search attributes are
// usable. ctx bounds the waits after the server is up (search attributes, UI); the server's own
// start is not interruptible and takes well under a second on an idle machine. On any error
// nothing is left running and the database file is free again.
func Start(ctx context.Context, opts Options) (*Server, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	dyn, err := buildDynamicConfig(opts.DynamicConfig)
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	s := &Server{namespace: opts.Namespace, logger: logger, unlock: func() {}}
	if !opts.Ephemeral {
		s.dbPath = opts.DBPath
		if s.unlock, err = lockDB(opts.DBPath); err != nil {
			return nil, err
		}
	}
	ok := false
	defer func() {
		if !ok {
			s.unlock()
		}
	}()

	ports, err := pickPorts(opts.IP, opts.Port)
	if err != nil {
		return nil, err
	}
	if opts.UIPort != 0 { // fail before the server starts rather than after
		if err := checkUIPort(opts.UIPort); err != nil {
			return nil, err
		}
	}
	s.hostPort = clientHostPort(opts.IP, ports.frontend)
	cfg := buildConfig(opts, ports)
	hosts := staticHosts(opts, ports)
	sqlCfg := sqliteConfig(cfg)

	if !opts.Ephemeral {
		if err := ensureSchema(opts.DBPath, sqlCfg); err != nil {
			return nil, err
		}
		if err := privateDB(opts.DBPath); err != nil {
			return nil, err
		}
	}
	if err := createNamespace(sqlCfg, cfg.ClusterMetadata.CurrentClusterName, opts); err != nil {
		return nil, err
	}
	if err := writePlannerStats(sqlCfg); err != nil {
		return nil, err
	}

	s.bridge = newServerLogger(logger.With("component", "temporal-server"))
	if err := s.startServer(cfg, hosts, dyn); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		_ = s.stopServer()
		return nil, fmt.Errorf("devserver: start: %w", err)
	}
	if err := s.registerSearchAttributes(ctx, opts.SearchAttributes); err != nil {
		_ = s.stopServer()
		return nil, err
	}
	if opts.UIPort != 0 {
		if s.ui, err = startUI(ctx, opts.UIPort, s.hostPort, s.namespace); err != nil {
			_ = s.stopServer()
			return nil, err
		}
	}
	ok = true
	return s, nil
}

// startServer builds and starts the server. The server reports some start-up failures (a port
// taken between picking it and binding it, a broken config) through Logger.Fatal, which the
// bridge turns into a panic; here that becomes an error instead of a crash.
func (s *Server) startServer(cfg *config.Config, hosts map[primitives.ServiceName]static.Hosts, dyn dynamicconfig.StaticClient) (err error) {
	defer func() {
		if r := recover(); r != nil {
			var fe fatalError
			if e, isErr := r.(error); isErr && errors.As(e, &fe) {
				err = fmt.Errorf("devserver: start server: %w", fe)
				return
			}
			panic(r)
		}
	}()
	srv, err := temporal.NewServer(serverOptions(cfg, hosts, dyn, s.bridge)...)
	if err != nil {
		return fmt.Errorf("devserver: create server: %w", err)
	}
	if err := srv.Start(); err != nil {
		_ = srv.Stop()
		return fmt.Errorf("devserver: start server: %w", err)
	}
	s.srv = srv
	return nil
}

// HostPort is the frontend address for SDK clients and the temporal CLI.
func (s *Server) HostPort() string { return s.hostPort }

// Namespace is the namespace created on start.
func (s *Server) Namespace() string { return s.namespace }

// DBPath is the SQLite file, or "" in ephemeral mode.
func (s *Server) DBPath() string { return s.dbPath }

// UIURL is the address of the Web UI, or "" when Options.UIPort was 0.
func (s *Server) UIURL() string {
	if s.ui == nil {
		return ""
	}
	return s.ui.url
}

// NewClient dials the server. opts.HostPort is always replaced by HostPort; an empty
// opts.Namespace becomes Namespace; a nil opts.Logger logs through Options.Logger at warn level
// instead of the SDK's default stdout logger. The caller closes the client before Stop.
func (s *Server) NewClient(ctx context.Context, opts client.Options) (client.Client, error) {
	opts.HostPort = s.hostPort
	if opts.Namespace == "" {
		opts.Namespace = s.namespace
	}
	if opts.Logger == nil {
		opts.Logger = sdkLogger(s.logger)
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("devserver: dial %s: %w", s.hostPort, err)
	}
	return c, nil
}

// Stop shuts the UI and the server down and releases the database file. It takes about a
// second. The server logs nothing from the moment Stop begins, so a test's logger may go away
// after it returns. Stop workers and close clients first.
// Calling it again returns the first result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		if s.ui != nil {
			s.ui.stop()
		}
		s.stopErr = s.stopServer()
		s.unlock()
	})
	return s.stopErr
}

func (s *Server) stopServer() error {
	// Shutting down produces a burst of expected warnings (pollers cut off, peers already
	// gone) that would only alarm whoever reads the log.
	s.bridge.close()
	if err := s.srv.Stop(); err != nil {
		return fmt.Errorf("devserver: stop: %w", err)
	}
	return nil
}

// sdkLogger adapts l for SDK clients, dropping the SDK's info-level chatter.
func sdkLogger(l *slog.Logger) sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(minLevelHandler{h: l.Handler(), min: slog.LevelWarn}))
}

// clientHostPort is the address clients dial: a wildcard bind address is reached via loopback.
func clientHostPort(ip string, port int) string {
	if parsed := net.ParseIP(ip); parsed != nil && parsed.IsUnspecified() {
		ip = "127.0.0.1"
	}
	return net.JoinHostPort(ip, strconv.Itoa(port))
}
