// Package pgtemporal runs the real Temporal server (go.temporal.io/server:
// frontend, history, matching and worker services in one process) on a
// throwaway PostgreSQL (internal/pgtest), as a child process that can be
// stopped, killed and started again on the same ports and databases: the
// production shape of docker-compose.yml, on one machine. The cluster
// suite (integration/cluster) and the chaos suite's -cluster mode both run
// their Temporal on it, so that what one suite proves about the shape holds
// for the other.
//
// The child is the calling program itself, started again with ServeEnv
// set: a program that uses a Cluster or a Server calls ServeIfChild first
// thing in its main (or TestMain), so no second 200 MB binary is built.
// Killing the child is a real crash of the server, which is the point.
package pgtemporal

import (
	"fmt"
	"log/slog"
	"net/url"
	"os"

	"go.temporal.io/server/common/persistence/sql/sqlplugin"

	"github.com/sandbot/sandbot/internal/pgtest"
)

// ServeEnv names the spec file of a child that is to run the Temporal
// server instead of the program's own main.
const ServeEnv = "SANDBOT_PGTEMPORAL_SERVE"

// ServeIfChild runs the Temporal server and exits when the process is a
// server child (ServeEnv is set); otherwise it returns at once.
func ServeIfChild() {
	if spec := os.Getenv(ServeEnv); spec != "" {
		serve(spec) // never returns
	}
}

// Databases are a server's two stores, as postgres://user:password@host:port/db
// URLs: the default store and visibility, as in production.
type Databases struct {
	Main, Visibility string
}

// Options shape a Server or a Cluster. The zero value is a plaintext
// frontend that lets every caller in, and clients that log nothing.
type Options struct {
	// Secure, when set, makes the frontend authenticate its callers.
	Secure *Secure
	// ClientLog receives what the clients of Dial and CreateNamespace
	// log (the level is the handler's to filter); nil discards it.
	ClientLog *slog.Logger
}

// SystemWorkerCN is the common name the system worker's certificate must
// have: the frontend knows the server's own worker by it, since that
// worker has no API key.
const SystemWorkerCN = "temporal-system-worker"

// Secure is a frontend that authenticates its callers as a production
// cluster (or Temporal Cloud) does: TLS with client certificates required,
// and an API key (a bearer token) required of every caller but the
// server's own system worker, which is known by its certificate. The
// fields are PEM files, except APIKey.
type Secure struct {
	// CA signed every certificate; Cert and Key are the frontend's.
	CA, Cert, Key string
	// SystemCert and SystemKey are the system worker's client
	// certificate, whose common name is SystemWorkerCN.
	SystemCert, SystemKey string
	// APIKey is the bearer token callers must present.
	APIKey string
	// ClientCert and ClientKey are the certificate Dial and
	// CreateNamespace present. The server child does not need them.
	ClientCert string `json:"-"`
	ClientKey  string `json:"-"`
}

// Cluster is one Temporal cluster: a throwaway PostgreSQL with the two
// databases, and the Temporal server as a child process (the embedded
// Server: Start, Stop, Kill, HostPort, Dial, ...).
type Cluster struct {
	*Server
	pg *pgtest.Server
}

// New creates the databases in a new PostgreSQL, sets up the schema and
// starts the server; dir holds its spec file and log (temporal.log).
// Close it.
func New(dir string, o Options) (*Cluster, error) {
	bin, err := pgtest.BinDir()
	if err != nil {
		return nil, err
	}
	pg, err := pgtest.New(bin, pgtest.Options{User: "temporal"})
	if err != nil {
		return nil, fmt.Errorf("start PostgreSQL: %w", err)
	}
	c := &Cluster{pg: pg}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	db, err := c.CreateDatabases("temporal")
	if err != nil {
		return nil, err
	}
	if c.Server, err = NewServer(dir, db, o); err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// Postgres is the cluster's PostgreSQL server (restartable).
func (c *Cluster) Postgres() *pgtest.Server { return c.pg }

// CreateDatabases creates the databases name and name_visibility in the
// cluster's PostgreSQL with the Temporal schema, for a server of their own
// (NewServer) beside the cluster's, which costs no second PostgreSQL.
func (c *Cluster) CreateDatabases(name string) (Databases, error) {
	dbURL := func(name string) string {
		return (&url.URL{Scheme: "postgres", User: url.UserPassword(c.pg.User, c.pg.Password), Host: c.pg.Addr(), Path: "/" + name}).String()
	}
	db := Databases{Main: dbURL(name), Visibility: dbURL(name + "_visibility")}
	for _, st := range []struct {
		url, dir string
		kind     sqlplugin.DbKind
	}{{db.Main, "postgresql/v12/temporal", sqlplugin.DbKindMain}, {db.Visibility, "postgresql/v12/visibility", sqlplugin.DbKindVisibility}} {
		cfg, err := sqlConfig(st.url)
		if err != nil {
			return Databases{}, err
		}
		if err := c.pg.CreateDatabase(cfg.DatabaseName); err != nil {
			return Databases{}, fmt.Errorf("create database %s: %w", cfg.DatabaseName, err)
		}
		if err := setupSchema(cfg, st.kind, st.dir); err != nil {
			return Databases{}, fmt.Errorf("schema of %s: %w", cfg.DatabaseName, err)
		}
	}
	return db, nil
}

// Close stops the server and PostgreSQL and removes the database files.
func (c *Cluster) Close() {
	if c.Server != nil {
		c.Server.Close()
	}
	if c.pg != nil {
		_ = c.pg.Close()
	}
}
