#!/usr/bin/env bash
# Usage: hack/describe-sidecar.sh HOST OUT COMMAND [ARGS...]
#
# Starts the sidecar COMMAND ARGS... ADDRESS, where ADDRESS (appended as the
# last argument) is a unix socket in a fresh temporary directory, asks it to
# describe itself with `HOST describe`, writes the description (JSON) to OUT
# and stops the sidecar. make manifests generates each overlay's RBAC and
# webhook configurations from such a description.
set -euo pipefail

if [[ $# -lt 3 ]]; then
	echo "usage: $0 HOST OUT COMMAND [ARGS...]" >&2
	exit 2
fi
host=$1 out=$2
shift 2

# A short directory: unix socket paths are limited to 108 bytes.
dir=$(mktemp -d /tmp/polyop-describe.XXXXXX)
address="unix://$dir/sidecar.sock"
"$@" "$address" >"$dir/sidecar.log" 2>&1 &
pid=$!
stop() {
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -rf "$dir"
}
trap stop EXIT

if ! "$host" describe --sidecar-address "$address" --sidecar-wait-timeout 60s >"$dir/description.json"; then
	echo "describing the sidecar $* failed; its output:" >&2
	cat "$dir/sidecar.log" >&2
	exit 1
fi
mkdir -p "$(dirname "$out")"
cp "$dir/description.json" "$out"
