#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Parity of tools/mega_kws_tools/model/ with the official fairseq Mega code, tiny
# configurations only (a few seconds). Needs a checkout or bare git dir of
# github facebookresearch/mega in $MEGA_OFFICIAL_REPO; exits 77 (skip) without one.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=${MEGA_OFFICIAL_REPO:-/work/.mirror/facebookresearch+mega/repo}
PYTHON=${PYTHON:-/usr/bin/python3}
export PYTHONPATH="$HERE/../../tools${PYTHONPATH:+:$PYTHONPATH}"  # the mega_kws_tools package
if [ ! -d "$REPO/fairseq" ] && ! git --git-dir="$REPO" rev-parse --verify -q HEAD >/dev/null 2>&1; then
    echo "SKIP: official repo not available"
    exit 77
fi
exec "$PYTHON" -m mega_kws_tools.convert.check_official --official-repo "$REPO" --sizes tiny "$@"
