#!/bin/sh
# .ci/docker.sh makes sure a Docker daemon answers before the Docker sandbox
# tests run, and that busybox-static (used to build the local test image, since
# no registry is reachable) is installed. It is idempotent: when a daemon
# already answers it changes nothing and never restarts or stops it.
#
# Start path, only when no daemon answers:
#   1. install docker.io (and busybox-static) with apt if dockerd is missing;
#   2. if a dockerd process is already alive (its pidfile names a live
#      process) it is probably still starting: wait for it, start nothing;
#   3. otherwise start dockerd in the background, detached from this shell,
#      logging to $SANDBOT_DOCKERD_LOG, trying storage drivers in order: the
#      one the daemon config names (if any), overlay2, vfs. A driver that fails
#      makes dockerd exit quickly, which moves on to the next one;
#   4. wait (bounded by $SANDBOT_DOCKERD_WAIT seconds in total) until
#      `docker info` answers; exit non-zero with the log tail if it never does.
#
# Knobs (all optional):
#   DOCKER_HOST            the daemon to check (unix sockets only for starting)
#   SANDBOT_DOCKERD_CONFIG base daemon config (default /etc/docker/daemon.json)
#   SANDBOT_DOCKERD_LOG    dockerd log file (default /tmp/sandbot-dockerd.log)
#   SANDBOT_DOCKERD_WAIT   seconds to wait in total (default 60)
set -eu

log() { printf '.ci/docker.sh: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

base_config=${SANDBOT_DOCKERD_CONFIG:-/etc/docker/daemon.json}
dockerd_log=${SANDBOT_DOCKERD_LOG:-/tmp/sandbot-dockerd.log}
wait_total=${SANDBOT_DOCKERD_WAIT:-60}
deadline=$(( $(date +%s) + wait_total ))

# answers reports whether the daemon named by DOCKER_HOST (or the default
# socket) answers within a few seconds.
answers() { timeout 10 docker info >/dev/null 2>&1; }

have_busybox_static() {
	dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed'
}

# ensure_packages installs what is missing, with one apt run.
ensure_packages() {
	pkgs=""
	command -v dockerd >/dev/null 2>&1 && command -v docker >/dev/null 2>&1 || pkgs="docker.io"
	have_busybox_static || pkgs="$pkgs busybox-static"
	[ -n "$pkgs" ] || return 0
	[ "$(id -u)" = 0 ] || die "missing packages ($pkgs) and not root: install them with apt-get"
	log "installing:$pkgs"
	apt-get update -qq >/dev/null || die "apt-get update failed"
	# shellcheck disable=SC2086 # word splitting of the package list is intended
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs >/dev/null ||
		die "apt-get install $pkgs failed"
}

# config_value KEY prints a top-level string value of the base config.
config_value() {
	[ -f "$base_config" ] || return 0
	tr -d '\n' <"$base_config" | sed -n "s/.*\"$1\"[[:space:]]*:[[:space:]]*\"\([^\"]*\)\".*/\1/p"
}

# write_config DRIVER FILE writes a copy of the base config that selects
# DRIVER, so the flag-versus-config-file conflict dockerd refuses never occurs.
write_config() {
	body='{}'
	[ -f "$base_config" ] && body=$(tr -d '\n' <"$base_config")
	if printf '%s' "$body" | grep -q '"storage-driver"'; then
		printf '%s\n' "$body" | sed "s/\"storage-driver\"[[:space:]]*:[[:space:]]*\"[^\"]*\"/\"storage-driver\": \"$1\"/" >"$2"
	elif printf '%s' "$body" | grep -q '^[[:space:]]*{[[:space:]]*}[[:space:]]*$'; then
		printf '{"storage-driver": "%s"}\n' "$1" >"$2"
	else
		printf '%s\n' "$body" | sed "0,/{/s//{\"storage-driver\": \"$1\", /" >"$2"
	fi
}

# pid_alive PID: the process exists and is not a zombie (a dockerd that
# exited but was not reaped yet still answers kill -0).
pid_alive() {
	[ -n "$1" ] && kill -0 "$1" 2>/dev/null && ! grep -q ') Z ' "/proc/$1/stat" 2>/dev/null
}

# wait_for PID waits until the daemon answers (0), PID exits (1) or the
# overall deadline passes (2).
wait_for() {
	while [ "$(date +%s)" -lt "$deadline" ]; do
		answers && return 0
		pid_alive "$1" || return 1
		sleep 1
	done
	return 2
}

if answers; then
	ensure_packages
	log "docker daemon is up ($(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})' 2>/dev/null))"
	exit 0
fi

case "${DOCKER_HOST:-unix:///var/run/docker.sock}" in
unix://*) ;;
*) die "no daemon answers at DOCKER_HOST=$DOCKER_HOST and it is not a local socket; start that daemon or unset DOCKER_HOST" ;;
esac
[ "$(id -u)" = 0 ] || die "no docker daemon answers and starting one needs root; start dockerd yourself"
ensure_packages
# Installing docker.io may have started the packaged service.
if answers; then
	log "docker daemon is up"
	exit 0
fi

pidfile=$(config_value pidfile)
pidfile=${pidfile:-/var/run/docker.pid}
if [ -f "$pidfile" ] && pid_alive "$(cat "$pidfile")"; then
	log "dockerd (pid $(cat "$pidfile")) is running but not answering yet; waiting up to ${wait_total}s"
	if wait_for "$(cat "$pidfile")"; then
		log "docker daemon is up"
		exit 0
	fi
	die "dockerd (pid from $pidfile) did not answer within ${wait_total}s; see its log"
fi

hosts_flag=""
[ -n "${DOCKER_HOST:-}" ] && ! grep -q '"hosts"' "$base_config" 2>/dev/null &&
	hosts_flag="-H $DOCKER_HOST"

drivers="$(config_value storage-driver) overlay2 vfs"
tried=""
for driver in $drivers; do
	case " $tried " in *" $driver "*) continue ;; esac
	tried="$tried $driver"
	cfg=/tmp/sandbot-dockerd-$driver.json
	write_config "$driver" "$cfg"
	log "starting dockerd (storage driver $driver, log $dockerd_log)"
	# setsid + nohup: the daemon must outlive this script and its session.
	# shellcheck disable=SC2086
	setsid nohup dockerd --config-file "$cfg" $hosts_flag >>"$dockerd_log" 2>&1 </dev/null &
	pid=$!
	if wait_for "$pid"; then
		log "docker daemon is up (pid $pid, storage driver $driver)"
		exit 0
	else
		rc=$?
	fi
	if [ "$rc" = 2 ]; then
		tail -n 20 "$dockerd_log" >&2 || true
		die "dockerd (pid $pid) started but did not answer within ${wait_total}s; it is left running, see $dockerd_log"
	fi
	log "dockerd exited with storage driver $driver; last log lines:"
	tail -n 5 "$dockerd_log" >&2 || true
done
die "dockerd failed to start with any storage driver ($tried ); see $dockerd_log"
