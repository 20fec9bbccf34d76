#!/bin/sh
# Registers the namespace sandbot uses on the compose Temporal server if it
# does not exist yet. Runs in temporalio/admin-tools as the one-shot service
# temporal-namespace, after the server is healthy; the worker and the bot
# start only after it succeeded. The worker registers sandbot's search
# attributes on the namespace itself.
#
# Environment: TEMPORAL_ADDRESS, NAMESPACE, RETENTION.
set -eu

address=${TEMPORAL_ADDRESS:-temporal:7233}
namespace=${NAMESPACE:-default}
retention=${RETENTION:-720h}

# Temporal's own compose scripts dial the frontend's IPv4 address rather
# than its name (the CLI has been seen to fail on the name inside compose);
# do the same where the name resolves.
host=${address%:*}
port=${address##*:}
ip=$(getent ahosts "$host" 2>/dev/null | awk '$2 == "STREAM" && $1 ~ /^[0-9.]+$/ { print $1; exit }') || true
[ -n "$ip" ] && address=$ip:$port

tries=0
until temporal operator cluster health --address "$address" >/dev/null 2>&1; do
	tries=$((tries + 1))
	if [ "$tries" -ge 30 ]; then
		echo "create-namespace: Temporal at $address is not healthy" >&2
		temporal operator cluster health --address "$address" >&2 || true
		exit 1
	fi
	sleep 2
done

if temporal operator namespace describe --namespace "$namespace" --address "$address" >/dev/null 2>&1; then
	echo "create-namespace: $namespace exists"
	exit 0
fi
temporal operator namespace create --namespace "$namespace" --retention "$retention" --address "$address"
echo "create-namespace: created $namespace (retention $retention)"
