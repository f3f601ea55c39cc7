#!/bin/sh
# Builds the static sluice binary. This is the one build recipe: the
# Dockerfile, scripts/release.sh and the tests that check them (e2e,
# TestContainerBinary and TestReleaseScript) all run it, so their flags
# cannot drift apart.
#
#   scripts/build.sh OUTPUT
#
# GOOS and GOARCH select the target (default: this machine). VERSION and
# COMMIT are stamped into the binary for `sluice version` (default: "dev"
# and "unknown", in which case sluice falls back to the module's build info).
# The binary is static (CGO_ENABLED=0: no libc, runs on scratch or
# distroless), built with -trimpath (no local paths in it) and stripped of
# its symbol table (-s -w).
set -eu

out=${1:?usage: scripts/build.sh OUTPUT}
case $out in
/*) ;;
*) out=$PWD/$out ;;
esac
cd "$(dirname "$0")/.."

pkg=github.com/sluice-gw/sluice/gateway/internal/cli
CGO_ENABLED=0 exec go build -trimpath \
	-ldflags "-s -w -X $pkg.Version=${VERSION:-dev} -X $pkg.Commit=${COMMIT:-unknown}" \
	-o "$out" ./gateway/cmd/sluice
