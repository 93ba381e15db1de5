#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Recorded music for training's non-speech negatives (issue 83 item 5;
# train.py --nonspeech-audio OUT): the music tracks of two Debian game-data
# packages, downloaded with apt-get download (nothing is installed), decoded
# to 16 kHz mono WAV files in OUT, with OUT/SOURCES.txt naming each track's
# package, version and license.
#
#   music_negatives.sh OUT
#
# xmoto-data (7 tracks) and lincity-ng-data (3), both GPL-2+, about 21 minutes.
# The music that tests/apps/test_nonspeech.py scans (chromium-bsu-data,
# frozen-bubble-data) is kept out of training: it judges what training learned.
# Needs apt-get, dpkg-deb and sox (scripts/setup.sh installs sox).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: music_negatives.sh OUT" >&2; exit 2; }
OUT=$1
PACKAGES=(xmoto-data lincity-ng-data)
for tool in apt-get dpkg-deb sox; do
  command -v "$tool" > /dev/null \
    || { echo "music_negatives.sh: $tool not found (a Debian machine's tools)" >&2; exit 1; }
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP" "$OUT.part"' EXIT
# as root apt-get download would hand the folder to its sandbox user, who cannot write in it
SANDBOX=()
[ "$(id -u)" -ne 0 ] || SANDBOX=(-o APT::Sandbox::User=root)
(cd "$TMP" && apt-get download -q "${SANDBOX[@]}" "${PACKAGES[@]}" > /dev/null) \
  || { echo "music_negatives.sh: apt-get download ${PACKAGES[*]} failed" >&2; exit 1; }
mkdir -p "$OUT.part"
{
  echo "Music for non-speech negatives (tools/scripts/music_negatives.sh): 16 kHz mono, decoded by sox."
  echo "Used in training only; not part of the product. Held out for the check: chromium-bsu-data, frozen-bubble-data."
} > "$OUT.part/SOURCES.txt"
for deb in "$TMP"/*.deb; do
  pkg=$(dpkg-deb -f "$deb" Package) version=$(dpkg-deb -f "$deb" Version)
  dpkg-deb -x "$deb" "$TMP/$pkg"
  license=$(grep -m1 '^License:' "$TMP/$pkg/usr/share/doc/$pkg/copyright" | cut -d' ' -f2-)
  n=0
  while IFS= read -r -d '' track; do
    name=$pkg-$(basename "$track" .ogg | tr -c 'A-Za-z0-9_\n-' '_').wav
    sox -V1 -G "$track" -r 16000 -c 1 -b 16 "$OUT.part/$name"
    echo "$name: $pkg $version, $license, ${track#"$TMP/$pkg"}" >> "$OUT.part/SOURCES.txt"
    n=$((n + 1))
  done < <(find "$TMP/$pkg/usr/share/games" -path '*usic*' -name '*.ogg' -print0 | sort -z)
  [ "$n" -gt 0 ] || { echo "music_negatives.sh: no music found in $pkg $version" >&2; exit 1; }
done
rm -rf "$OUT" && mv "$OUT.part" "$OUT"
echo "music_negatives.sh: $(ls "$OUT"/*.wav | wc -l) tracks in $OUT"
