#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Recorded music for training's non-speech negatives (issue 83 item 5;
# train.py --nonspeech-audio OUT): the music tracks of Debian game-data
# packages, downloaded with apt-get download (nothing is installed), decoded
# to 16 kHz mono WAV files in OUT, with OUT/SOURCES.txt naming each track's
# package, version and license.
#
#   music_negatives.sh OUT [PACKAGE ...]
#
# A track is an Ogg Vorbis or Opus file in a folder named *usic* inside the
# game's folder, or any such file of at least MIN_TRACK_S seconds (some games
# keep their music beside their sounds).
# The packages: by default xmoto-data (7 tracks) and lincity-ng-data (3), both
# GPL-2+, about 21 minutes, the music the bundled model trained with. The
# model card's runs of 2026-12-07 (q83) add six of Kenta Cho's games,
# BSD-style, 24 tracks, about 24 minutes: a7xpg-data tumiki-fighters-data
# rrootage-data parsec47-data torus-trooper-data mu-cade-data. The runs of
# 2026-12-08 (t83) add three more packages, 43 tracks, about 260 minutes:
# extremetuxracer-data (GPL-2+), powermanga-data (GPL-3+) and
# warzone2100-music (GPL-2+, Opus).
# The music that tests/apps/test_nonspeech.py scans (chromium-bsu-data,
# frozen-bubble-data) is kept out of training: it judges what training
# learned; the script refuses those packages. So are gunroar-data, a seventh
# of Kenta Cho's games, and wesnoth-1.16-music (GPL-2+, 41 orchestral tracks,
# 128 minutes): the model card's held-out music beside the check's.
# Needs apt-get, dpkg-deb, sox and, for Opus tracks, opusdec (scripts/setup.sh
# installs sox and opus-tools).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: music_negatives.sh OUT [PACKAGE ...]" >&2; exit 2; }
OUT=$1
shift
PACKAGES=("$@")
[ $# -gt 0 ] || PACKAGES=(xmoto-data lincity-ng-data)
for pkg in "${PACKAGES[@]}"; do
  case $pkg in
    chromium-bsu-data|frozen-bubble-data|gunroar-data|wesnoth-1.16-music)
      echo "music_negatives.sh: $pkg is held out (tests/apps/test_nonspeech.py, the model card): not for training" >&2
      exit 2 ;;
  esac
done
MIN_TRACK_S=20
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
  echo "Used in training only; not part of the product. Held out for the check: chromium-bsu-data, frozen-bubble-data; for the model card: gunroar-data, wesnoth-1.16-music."
} > "$OUT.part/SOURCES.txt"
for deb in "$TMP"/*.deb; do
  pkg=$(dpkg-deb -f "$deb" Package) version=$(dpkg-deb -f "$deb" Version)
  dpkg-deb -x "$deb" "$TMP/$pkg"
  license=$(grep -m1 '^License:' "$TMP/$pkg/usr/share/doc/$pkg/copyright" | cut -s -d' ' -f2-)
  [ -n "$license" ] || license="its /usr/share/doc/$pkg/copyright"  # a license given as text, unnamed
  n=0
  while IFS= read -r -d '' track; do
    decoded=$track
    if [[ $track == *.opus ]]; then  # sox has no Opus reader: opusdec decodes to a 48 kHz WAV file first
      command -v opusdec > /dev/null \
        || { echo "music_negatives.sh: $pkg has Opus music; opusdec not found (Debian's opus-tools)" >&2; exit 1; }
      decoded=$TMP/decoded.wav
      opusdec --quiet "$track" "$decoded"
    fi
    below_game=${track#"$TMP/$pkg/usr/share/games/"*/}  # the game's own folder may be named *music*
    if [[ $(dirname "$below_game") != *usic* ]]; then
      long=$(soxi -D "$decoded" | awk -v min="$MIN_TRACK_S" '{ print ($1 >= min) }')
      [ "$long" = 1 ] || continue  # a sound, not music
    fi
    base=$(basename "$track")
    name=$pkg-$(printf '%s' "${base%.*}" | tr -c 'A-Za-z0-9_-' '_').wav
    [ ! -e "$OUT.part/$name" ] \
      || { echo "music_negatives.sh: two tracks of $pkg would both be $name" >&2; exit 1; }
    # -R: the same dither on every run, so the folder rebuilds bit for bit
    sox -R -V1 -G "$decoded" -r 16000 -c 1 -b 16 "$OUT.part/$name"
    echo "$name: $pkg $version, $license, ${track#"$TMP/$pkg"}" >> "$OUT.part/SOURCES.txt"
    n=$((n + 1))
  done < <(find "$TMP/$pkg/usr/share/games" \( -name '*.ogg' -o -name '*.opus' \) -print0 | sort -z)
  [ "$n" -gt 0 ] || { echo "music_negatives.sh: no music found in $pkg $version" >&2; exit 1; }
done
rm -rf "$OUT" && mv "$OUT.part" "$OUT"
echo "music_negatives.sh: $(ls "$OUT"/*.wav | wc -l) tracks in $OUT"
