#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Installs what the aarch64 cross build needs (skips what is already there):
# Debian's cross g++, qemu-user to run the result, and the arm64 multiarch
# -dev packages of the project's libraries.
set -euo pipefail
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "adding the arm64 architecture (multiarch)"
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -q
fi
PKGS=(g++-aarch64-linux-gnu
      libopenblas-dev:arm64 libflatbuffers-dev:arm64 libgtest-dev:arm64 libsndfile1-dev:arm64
      libsamplerate0-dev:arm64 portaudio19-dev:arm64)
# qemu-user (qemu-aarch64) or qemu-user-static (qemu-aarch64-static): either will do
command -v qemu-aarch64 >/dev/null || command -v qemu-aarch64-static >/dev/null || PKGS+=(qemu-user-static)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
