#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Builds an aarch64 sysroot from Debian's arm64 packages: a stand-in for a
# JetPack root file system, so that the sysroot path of the toolchain files
# (-DMEGA_SYSROOT) is exercised here. It does what docs/jetson.md asks of a
# copied rootfs: the -dev packages are in it, absolute symlinks are made
# relative, and the OpenBLAS alternatives (set by maintainer scripts, which
# dpkg -x does not run) are linked. Usage: scripts/make_test_sysroot.sh DIR
set -euo pipefail
DIR=$(realpath -m "$1")
PKGS=(libc6-dev:arm64 linux-libc-dev:arm64 libstdc++-12-dev:arm64 libgcc-12-dev:arm64 libopenblas-dev:arm64
      libflatbuffers-dev:arm64 libgtest-dev:arm64 libsndfile1-dev:arm64 libsamplerate0-dev:arm64 portaudio19-dev:arm64)
DEBS=$(mktemp -d)
trap 'rm -rf "$DEBS"' EXIT
chmod 777 "$DEBS"   # apt-get download runs as _apt where it can
mapfile -t ALL < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
                     --no-replaces --no-enhances --no-pre-depends "${PKGS[@]}" | grep -E '^[a-z0-9][^ ]*:arm64$' | sort -u)
(cd "$DEBS" && apt-get download -q "${ALL[@]}" >/dev/null 2>&1)
rm -rf "$DIR" && mkdir -p "$DIR"
for d in "$DEBS"/*.deb; do dpkg -x "$d" "$DIR"; done
find "$DIR" -type l -lname '/*' -print0 | while IFS= read -r -d '' l; do
  ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$DIR$(readlink "$l")")" "$l"
done
L=$DIR/usr/lib/aarch64-linux-gnu
ln -sfn openblas-pthread/libopenblas.so.0 "$L/libopenblas.so.0"
ln -sfn openblas-pthread/libopenblas.so "$L/libopenblas.so"
ln -sfn ../openblas-pthread/pkgconfig/openblas.pc "$L/pkgconfig/openblas.pc"
echo "sysroot: $DIR (${#ALL[@]} packages)"
