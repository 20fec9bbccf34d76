package pgtemporal

import (
	"bytes"
	"crypto/md5" // #nosec: the schema tool records manifest checksums as md5
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence"
	"go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	"go.temporal.io/server/common/resolver"
	"go.temporal.io/server/schema"
)

// setupSchema gives an empty database the Temporal schema the way
// temporal-sql-tool does (setup-schema -v 0.0, then update-schema -d
// versioned): the version tables, then every versioned directory of the
// schema embedded in the server module, in version order, recording each
// version. dir is "postgresql/v12/temporal" or "postgresql/v12/visibility".
func setupSchema(cfg *config.SQL, kind sqlplugin.DbKind, dir string) error {
	db, err := sql.NewSQLAdminDB(kind, cfg, resolver.NewNoopResolver(), log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer db.Close()
	if err := db.CreateSchemaVersionTables(); err != nil {
		return fmt.Errorf("version tables: %w", err)
	}
	if err := db.UpdateSchemaVersion(cfg.DatabaseName, "0.0", "0.0"); err != nil {
		return fmt.Errorf("version 0.0: %w", err)
	}
	fsys := schema.Assets()
	versioned := path.Join(dir, "versioned")
	entries, err := fs.ReadDir(fsys, versioned)
	if err != nil {
		return fmt.Errorf("embedded schema: %w", err)
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
			return fmt.Errorf("embedded schema: %w", err)
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
				return fmt.Errorf("embedded schema: %w", err)
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
			return fmt.Errorf("record version %s: %w", m.CurrVersion, err)
		}
		if err := db.WriteSchemaUpdateLog(cur, m.CurrVersion, hex.EncodeToString(sum[:]), m.Description); err != nil {
			return fmt.Errorf("record the update to %s: %w", m.CurrVersion, err)
		}
		cur = m.CurrVersion
	}
	if cur != db.ExpectedVersion() {
		return fmt.Errorf("schema %s ends at %s, the server expects %s", dir, cur, db.ExpectedVersion())
	}
	return nil
}

// versionLess orders dotted schema versions numerically (v1.10 after
// v1.9), as the schema tool applies them.
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
