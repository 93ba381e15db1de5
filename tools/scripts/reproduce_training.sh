#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The bundled model's recipe (docs/models.md, "How to train"), from a git clone
# of this repository and the public sources it names, nothing else:
#
#   [WORK=DIR] [MIRROR=DIR] [BUILD=DIR] [DRY_RUN=1] tools/scripts/reproduce_training.sh [STAGE...]
#
# Stages, in order (default: all; each skips what is already made, so the
# script can be run again after an interruption):
#   setup    the Debian packages (scripts/setup.sh: sox, the text-to-speech voices, PyTorch...)
#   sources  git clone of every repository the real data come from, at its pinned commit
#            (tools/mega_kws_tools/data/real_sc_sources.txt and the sentence sources:
#            python3 -m mega_kws_tools.data.sources lists them) into MIRROR/<owner>+<name>/repo
#   build    keyword_spotter, in BUILD
#   start    the model the recipe continues: s71nnh, the bundled model of commit a3dad71
#            (read from this clone's history: a full clone, not a shallow one)
#   r72a     2,500 steps from s71nnh with hard examples it mines (continue_real.sh)
#   s71nnh   the starting model measured, for the ship rule
#   r73a     2,000 steps from r72a with hard examples r72a mines, judged against s71nnh:
#            WORK/runs/r73a/model.mega is the bundled model's counterpart
# Folders (defaults under the repository; work/ is not tracked):
#   WORK    data, recordings and runs [REPO/work]; RUNS [WORK/runs]
#   MIRROR  the cloned sources [WORK/sources]
#   BUILD   the build of keyword_spotter [REPO/build]
# DRY_RUN=1 prints each command instead of running it.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$(dirname "$HERE")")
export WORK=${WORK:-$ROOT/work}
export MIRROR=${MIRROR:-$WORK/sources}
BUILD=${BUILD:-$ROOT/build}
export KS=$BUILD/keyword_spotter
RUNS=${RUNS:-$WORK/runs}
PY=/usr/bin/python3
START_COMMIT=a3dad71f949d4fb8033b40b2add2eeecac0932fb  # the commit that shipped s71nnh
STAGES=(setup sources build start r72a s71nnh r73a)

run() {  # run CMD...: the command, or in a dry run its line
  if [ "${DRY_RUN:-0}" = 1 ]; then echo "+ $*"; else "$@"; fi
}
fail() { echo "reproduce_training.sh: $*" >&2; exit 1; }

stage_setup() { run bash "$ROOT/scripts/setup.sh"; }

stage_sources() {
  local repo commit dir list
  # the list comes from the tools themselves, so the clones cannot drift from what they read
  list=$(PYTHONPATH="$ROOT/tools" $PY -m mega_kws_tools.data.sources)
  [ -n "$list" ] || fail "python3 -m mega_kws_tools.data.sources listed no source"
  while read -r repo commit; do
    dir=$MIRROR/${repo%%/*}+${repo#*/}/repo
    if [ ! -d "$dir" ]; then
      run mkdir -p "$(dirname "$dir")"
      run git clone --bare "https://github.com/$repo.git" "$dir"
    fi
    # a commit no branch reaches any more is not in a clone: fetched by its id
    if [ "${DRY_RUN:-0}" != 1 ] && ! git --git-dir "$dir" cat-file -e "$commit^{commit}" 2>/dev/null; then
      git --git-dir "$dir" fetch -q origin "$commit" || fail "$repo: commit $commit is neither in the clone nor fetchable"
    fi
    run git --git-dir "$dir" cat-file -e "$commit^{commit}"
  done <<< "$list"
}

stage_build() {
  [ -f "$BUILD/CMakeCache.txt" ] || run cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
  run cmake --build "$BUILD" --target keyword_spotter
}

stage_start() {
  [ -f "$WORK/s71nnh.mega" ] && return
  if [ "${DRY_RUN:-0}" != 1 ]; then
    git -C "$ROOT" cat-file -e "$START_COMMIT:models/sc10-demo.mega" 2>/dev/null ||
      fail "commit $START_COMMIT is not in $ROOT's history: clone the repository whole (git fetch --unshallow)"
    mkdir -p "$WORK"
    git -C "$ROOT" show "$START_COMMIT:models/sc10-demo.mega" > "$WORK/s71nnh.mega.part"
    mv "$WORK/s71nnh.mega.part" "$WORK/s71nnh.mega"
  else
    echo "+ git -C $ROOT show $START_COMMIT:models/sc10-demo.mega > $WORK/s71nnh.mega"
  fi
}

stage_r72a() {
  run env STEPS=2500 HARD_SHARE=0.05 bash "$HERE/continue_real.sh" "$WORK/s71nnh.mega" demo-wide-mel "$RUNS/r72a" 181
}

stage_s71nnh() {
  run mkdir -p "$RUNS/s71nnh"
  [ -f "$RUNS/s71nnh/best.pt" ] || run env PYTHONPATH="$ROOT/tools" $PY -m mega_kws_tools.convert.mega_unpack \
    "$WORK/s71nnh.mega" -o "$RUNS/s71nnh/best.pt"
  [ -f "$RUNS/s71nnh/eval-realval.json" ] || run bash "$HERE/measure_run.sh" "$RUNS/s71nnh"
}

stage_r73a() {
  run env STEPS=2000 HARD_SHARE=0.05 SHIPPED_RUN="$RUNS/s71nnh" bash "$HERE/continue_real.sh" \
    "$RUNS/r72a/model.mega" demo-wide-mel "$RUNS/r73a" 183
}

[ $# -gt 0 ] || set -- "${STAGES[@]}"
for s in "$@"; do
  [[ " ${STAGES[*]} " == *" $s "* ]] || fail "no stage '$s' (stages: ${STAGES[*]})"
done
for s in "$@"; do
  echo "== $s"
  "stage_$s"
done
