package devserver

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
)

// historyReadQuery is the query the pinned server's SQLite plugin runs to read a workflow
// run's events from a node on (getHistoryNodesQuery in
// go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite/events.go), at every workflow
// task.
const historyReadQuery = `SELECT node_id, prev_txn_id, txn_id, data, data_encoding FROM history_node ` +
	`WHERE shard_id = ? AND tree_id = ? AND branch_id = ? AND ((node_id = ? AND txn_id > ?) OR node_id > ?) AND node_id < ? ` +
	`ORDER BY shard_id, tree_id, branch_id, node_id, txn_id LIMIT ? `

// historyReadPlan is SQLite's plan for historyReadQuery on the database at path.
func historyReadPlan(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+historyReadQuery, 1, []byte("tree"), []byte("branch"), 5, 0, 5, 100, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}

// The history read of every workflow task searches only the new events, both bounds in the
// index, instead of walking the run's history from its first event (the plan SQLite picks
// without planner statistics: `node_id<?` alone). Also on a database an older build created,
// without the statistics.
func TestHistoryReadsSearchOnlyNewEvents(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dev.db")
	bounded := "shard_id=? AND tree_id=? AND branch_id=? AND node_id>? AND node_id<?"
	for _, life := range []string{"new database", "database without statistics"} {
		s := startServer(t, Options{DBPath: db, Logger: testLogger(t)})
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		if plan := historyReadPlan(t, db); !strings.Contains(plan, bounded) {
			t.Fatalf("%s: the history read's plan is %q; want a search with %q", life, plan, bounded)
		}
		// What an older build left: no statistics at all.
		rw, err := sql.Open("sqlite", "file:"+db)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rw.Exec("DELETE FROM sqlite_stat1"); err != nil {
			t.Fatal(err)
		}
		rw.Close()
		if plan := historyReadPlan(t, db); strings.Contains(plan, bounded) {
			t.Fatalf("without statistics the plan is already %q: this test cannot tell the fix from its absence", plan)
		}
	}
}
