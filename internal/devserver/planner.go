package devserver

import (
	"fmt"

	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	"go.temporal.io/server/common/resolver"
)

// historyNodeStats is what SQLite's query planner is told about the history table's
// primary-key index (sqlite_stat1's format: the rows, then the rows per distinct prefix of
// shard, tree, branch, node and transaction): many rows, one shard, about a thousand rows per
// workflow run, one row per node.
//
// Why: the server reads a workflow's new events at every workflow task with
//
//	WHERE shard_id = ? AND tree_id = ? AND branch_id = ?
//	  AND ((node_id = ? AND txn_id > ?) OR node_id > ?) AND node_id < ?
//
// Without statistics SQLite takes only the upper bound `node_id < ?` to the index, so it walks
// the run's history from its first event to the last at every task: a cost that grows with the
// run's length, paid on the critical path of every tool call of a long session (2.5 ms a task
// at 19,000 events). With these figures it searches the two arms of the OR, each with both
// bounds, and reads only the new events. The figures only steer the plan; results are the
// same. They are written at every start, so a database created by an older build gains them.
const historyNodeStats = "1000000 1000000 1000 1000 1 1"

// historyIndex is the name SQLite gives the history table's primary key in the pinned
// server's schema.
const historyIndex = "sqlite_autoindex_history_node_1"

// writePlannerStats records historyNodeStats and has the connection load them. It goes
// through the plugin's shared connection, so an in-memory database gets them too, and the
// server, which uses that same connection, plans with them from its first query.
func writePlannerStats(sqlCfg *config.SQL) error {
	db, err := sql.NewSQLAdminDB(sqlplugin.DbKindUnknown, sqlCfg, resolver.NewNoopResolver(), log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return fmt.Errorf("devserver: planner statistics: open database: %w", err)
	}
	defer func() { _ = db.Close() }()
	for _, stmt := range []string{
		// Analysing the (small) schema table creates sqlite_stat1 if it is missing, without
		// reading the large tables.
		"ANALYZE sqlite_schema",
		"DELETE FROM sqlite_stat1 WHERE tbl = 'history_node'",
		"INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('history_node', '" + historyIndex + "', '" + historyNodeStats + "')",
		// Reloads the statistics into this connection's planner.
		"ANALYZE sqlite_schema",
	} {
		if err := db.Exec(stmt); err != nil {
			return fmt.Errorf("devserver: planner statistics: %s: %w", stmt, err)
		}
	}
	return nil
}
