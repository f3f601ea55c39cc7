#!/bin/sh
# Cross-compiles sluice's release archives, as .goreleaser.yaml describes
# them, for machines without goreleaser:
#
#   VERSION=v0.1.0 scripts/release.sh [DIST]
#
# For each target in TARGETS (default: linux/amd64 linux/arm64 darwin/amd64
# darwin/arm64) it builds the static binary with scripts/build.sh and packs
# it with LICENSE, NOTICE, README.md and CHANGELOG.md into
# DIST/sluice_<version>_<os>_<arch>.tar.gz (the version without its leading
# "v"), then writes DIST/sluice_<version>_checksums.txt (SHA-256). DIST
# defaults to dist/ and is emptied first. VERSION defaults to
# `git describe --tags --always --dirty`, COMMIT to the current commit's
# 12-digit hash.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
dist=${1:-$root/dist}
case $dist in
/*) ;;
*) dist=$PWD/$dist ;;
esac
VERSION=${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)}
COMMIT=${COMMIT:-$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
export VERSION COMMIT
TARGETS=${TARGETS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
name_version=${VERSION#v}

rm -rf "$dist"
mkdir -p "$dist"
for target in $TARGETS; do
	GOOS=${target%/*}
	GOARCH=${target#*/}
	export GOOS GOARCH
	dir=sluice_${name_version}_${GOOS}_${GOARCH}
	mkdir -p "$dist/$dir"
	"$root/scripts/build.sh" "$dist/$dir/sluice"
	cp "$root/LICENSE" "$root/NOTICE" "$root/README.md" "$root/CHANGELOG.md" "$dist/$dir/"
	tar -C "$dist" -czf "$dist/$dir.tar.gz" "$dir"
	rm -rf "${dist:?}/$dir"
	echo "release: $dist/$dir.tar.gz"
done

cd "$dist"
if command -v sha256sum >/dev/null 2>&1; then
	sha256sum ./*.tar.gz | sed 's# \./# #' >"sluice_${name_version}_checksums.txt"
else
	shasum -a 256 ./*.tar.gz | sed 's# \./# #' >"sluice_${name_version}_checksums.txt"
fi
echo "release: $dist/sluice_${name_version}_checksums.txt"
