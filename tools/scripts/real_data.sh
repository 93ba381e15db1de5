# SPDX-License-Identifier: Apache-2.0
# Sourced by continue_real.sh and measure_run.sh (after they set HERE, their
# own folder): the project's tools and the real data's folders under WORK
# (default work/ in the repository), the cloned sources in MIRROR (default
# WORK/sources; reproduce_training.sh sources clones them). Not a script to run.
ROOT=$(dirname "$(dirname "$HERE")")
PY=/usr/bin/python3
export PYTHONPATH="$ROOT/tools${PYTHONPATH:+:$PYTHONPATH}"  # the mega_kws_tools package
WORK=${WORK:-$ROOT/work}
MIRROR=${MIRROR:-$WORK/sources}  # <owner>+<name>/repo: a clone of each source
KS=${KS:-$ROOT/build/keyword_spotter}
REAL=$WORK/data/real_sc       # Speech Commands clips of training- and validation-split speakers
SO=$WORK/data/so762           # speechocean762's keyword-free sentences (train/ half)
SOKW=$WORK/data/so762kw       # keywords cut from speechocean762's sentences
SOSENT=$SO/keyword_sentences_validation  # .wav/.csv: validation speakers' sentences with keywords, whole
CATHY=$WORK/data/cathykw      # keywords cut from rhasspy/dataset-voice-cathy
NEAR=$WORK/data/nearmiss      # -so-training.npz, -so-validation.npz, -cathy.npz: near misses in running speech
SYN=$WORK/data/syn71          # synthetic training voices
MUSIC=$WORK/data/music        # recorded music for non-speech negatives (music_negatives.sh)
REC=$WORK/rec                 # recordings spliced from real clips
