#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages the project needs (skips what is already there).
set -euo pipefail
PKGS=(build-essential cmake ninja-build pkg-config
      libflatbuffers-dev flatbuffers-compiler libopenblas-dev libgtest-dev libbenchmark-dev libsndfile1-dev
      libsamplerate0-dev portaudio19-dev
      python3 python3-torch python3-numpy python3-flatbuffers python3-pytest python3-matplotlib python3-pip python3-setuptools python3-venv
      python3-pocketsphinx pocketsphinx-en-us python3-onnx
      wamerican   # mega_kws_tools.custom: near misses drawn from ordinary words
      sox espeak-ng flite time
      opus-tools   # tools/scripts/music_negatives.sh: Opus music (warzone2100-music)
      festival festvox-kallpc16k festvox-ca-ona-hts festvox-czech-dita festvox-czech-krb festvox-czech-machac
      festvox-czech-ph festvox-italp16k festvox-itapc16k festvox-suopuhe-lj festvox-suopuhe-mv festvox-ru
      festvox-hi-nsk festvox-mr-nsk festvox-te-nsk festival-hi festival-mr festival-te
      pulseaudio pulseaudio-utils libasound2-plugins jackd2 alsa-utils
      valgrind clang libclang-rt-14-dev
      chromium-bsu-data   # tests/apps/test_nonspeech.py: its two music loops (Expat), 1.6 MB
      lintian)   # scripts/test_packages.sh: the Debian packages must be clean of lintian errors
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
