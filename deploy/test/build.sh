#!/bin/sh
# deploy/test/build.sh builds the sandbot images of deploy/compose.test.yml
# on a machine that reaches no image registry: the binaries are compiled on
# the host (CGO_ENABLED=0, as deploy/Dockerfile does), the root file systems
# are assembled from host files, and the images are built FROM scratch.
#
#   worker-local  the worker with bubblewrap (and its libraries) and
#                 busybox-static as the sandbox's shell and tools
#   sandbox       busybox-static, for the docker backend
#   worker, bot   the static binaries, CA certificates, a passwd entry
#
# Needs: go, docker, bwrap and busybox-static on the host (Debian:
# apt-get install bubblewrap busybox-static). Prints the image sizes.
# With docker compose (v2) or docker-compose it builds through the override
# (so the merged file's build sections are what is exercised); otherwise
# with docker build. Images: sandbot-test/{worker-local,worker,sandbox,bot}:local.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$here/out

die() { echo "deploy/test/build.sh: $*" >&2; exit 1; }
for tool in go docker bwrap busybox ldd; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool is missing"
done
busybox=$(command -v busybox)
ldd "$busybox" >/dev/null 2>&1 && die "$busybox is dynamically linked; install busybox-static"

rm -rf "$out"
mkdir -p "$out/bin" "$out/home"

echo "== binaries"
(cd "$root" && for p in bot worker; do
	CGO_ENABLED=0 GOFLAGS=-trimpath go build -ldflags="-s -w" -o "$out/bin/sandbot-$p" "./cmd/$p"
done && CGO_ENABLED=0 GOFLAGS=-trimpath go build -ldflags="-s -w" -o "$out/bin/sandbot-healthcheck" ./deploy/healthcheck)

# add_base DIR: the files every image has (a passwd entry for uid 10001, CA
# certificates, /tmp).
add_base() {
	mkdir -p "$1/etc/ssl/certs" "$1/tmp"
	chmod 1777 "$1/tmp"
	cp /etc/ssl/certs/ca-certificates.crt "$1/etc/ssl/certs/"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nsandbot:x:10001:10001:sandbot:/var/lib/sandbot:/sbin/nologin\nsandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\n' >"$1/etc/passwd"
	printf 'root:x:0:\nsandbot:x:10001:\nsandbox:x:1000:\n' >"$1/etc/group"
}

# add_busybox DIR: busybox-static as /bin/sh and its applets in /bin.
add_busybox() {
	mkdir -p "$1/bin" "$1/usr/bin" "$1/sbin"
	cp "$busybox" "$1/bin/busybox"
	for applet in $("$busybox" --list); do
		[ -e "$1/bin/$applet" ] || ln -s busybox "$1/bin/$applet"
	done
}

echo "== root file systems"
add_base "$out/scratch"
add_base "$out/sandbox"
add_busybox "$out/sandbox"
add_base "$out/local"
add_busybox "$out/local"
bwrap=$(command -v bwrap)
mkdir -p "$out/local/usr/bin"
cp "$bwrap" "$out/local/usr/bin/bwrap"
for lib in $(ldd "$bwrap" | grep -o '/[^ ]*'); do
	mkdir -p "$out/local$(dirname "$lib")"
	cp -L "$lib" "$out/local$lib"
done

echo "== images"
compose=""
if docker compose version >/dev/null 2>&1; then
	compose="docker compose"
elif command -v docker-compose >/dev/null 2>&1; then
	compose="docker-compose"
fi
if [ -n "$compose" ]; then
	# Interpolation needs the required variables; the values do not matter
	# for a build.
	(cd "$root" && SANDBOT_DECISION_KEY=build POSTGRES_PASSWORD=build S3_ACCESS_KEY_ID=build S3_SECRET_ACCESS_KEY=build \
		$compose --env-file "$root/.env.example" -f docker-compose.yml -f deploy/compose.test.yml --profile docker \
		build worker worker-docker sandbox-image bot)
else
	for t in worker-local worker sandbox bot; do
		docker build -f "$here/Dockerfile" --target "$t" -t "sandbot-test/$t:local" "$here"
	done
fi

echo "== sizes"
for t in worker-local worker sandbox bot; do
	printf '%-36s %s\n' "sandbot-test/$t:local" "$(docker image inspect -f '{{.Size}}' "sandbot-test/$t:local" | awk '{printf "%.1f MB", $1/1e6}')"
done
for b in "$out"/bin/*; do
	printf '%-36s %s\n' "$(basename "$b")" "$(stat -c %s "$b" | awk '{printf "%.1f MB", $1/1e6}')"
done
