#!/bin/sh
# Creates Temporal's two PostgreSQL databases if missing and brings their
# schemas to the version this admin-tools image ships: the first `up` sets
# them up, an `up` after raising TEMPORAL_VERSION upgrades them. Every step
# is idempotent. Runs in temporalio/admin-tools as the one-shot service
# temporal-schema; the Temporal server starts only after it succeeded.
#
# Environment: POSTGRES_HOST, POSTGRES_PORT, POSTGRES_USER, SQL_PASSWORD.
set -eu

host=${POSTGRES_HOST:-postgres}
port=${POSTGRES_PORT:-5432}
user=${POSTGRES_USER:-temporal}
schema=/etc/temporal/schema/postgresql/v12

# sql DB ARGS... runs temporal-sql-tool on database DB (the password comes
# from SQL_PASSWORD, not the command line).
sql() {
	db=$1
	shift
	temporal-sql-tool --plugin postgres12 --ep "$host" -p "$port" -u "$user" --db "$db" "$@"
}

# PostgreSQL is healthy before this job starts (depends_on); still, give a
# server that is restarting a minute.
tries=0
until sql temporal create; do
	tries=$((tries + 1))
	if [ "$tries" -ge 30 ]; then
		echo "setup-schema: cannot create the database temporal on $host:$port" >&2
		exit 1
	fi
	sleep 2
done

for pair in temporal:temporal temporal_visibility:visibility; do
	db=${pair%%:*}
	dir=$schema/${pair#*:}/versioned
	echo "setup-schema: $db"
	sql "$db" create
	# Records version 0.0 only in a database that has no schema yet.
	sql "$db" setup-schema -v 0.0
	sql "$db" update-schema -d "$dir"
done
echo "setup-schema: done"
