#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The installed package, as a user of it sees it:
#  - cmake --install of BUILD_DIR into a scratch prefix;
#  - examples/embed built from its own build tree with find_package(MegaKWS),
#    and again with a plain compiler line from pkg-config; both stream
#    samples/commands.wav through the C API's detector and must print the
#    detections the installed keyword_spotter scan prints, byte for byte; so
#    must the README's ten-line C example;
#  - the installed Python package (lib/python3/dist-packages/mega_kws) imports
#    and finds the installed library by itself (and the microphone's,
#    libmega_kws_audio), and python3 -m mega_kws scan prints the same
#    detections too;
#  - a C++ program against the installed C++ headers (mega/engine.hpp);
#  - the installed CLI classifies an installed sample with the installed model;
#  - the installed converter (bin/mega-convert) converts a checkpoint that the
#    installed CLI then self-tests;
#  - every relative link in the installed documentation (share/doc/mega-kws)
#    resolves inside it (scripts/check_doc_links.py).
# Usage: scripts/test_install.sh [BUILD_DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
ROOT=$PWD
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
P=$T/prefix
cmake --install "$BUILD" --prefix "$P" >/dev/null
LIBDIR=$(dirname "$(find "$P" -name 'libmega_kws.so' | head -1)")
MODEL=$P/share/mega_kws/models/sc10-demo.mega

"$P/bin/keyword_spotter" scan -m "$MODEL" samples/commands.wav > "$T/scan.txt"
[ -s "$T/scan.txt" ] || { echo "keyword_spotter scan reported nothing at the model's defaults"; exit 1; }
# the model's defaults are strict; at --sensitivity 0.8 all five words
"$P/bin/keyword_spotter" scan -m "$MODEL" --sensitivity 0.8 samples/commands.wav > "$T/scan08.txt"
for w in yes stop go left no; do
  grep -q "	$w	" "$T/scan08.txt" || { echo "keyword_spotter scan never reported '$w'"; cat "$T/scan08.txt"; exit 1; }
done

cmake -S examples/embed -B "$T/embed" -G Ninja -DCMAKE_PREFIX_PATH="$P" >/dev/null
cmake --build "$T/embed"
"$T/embed/embed_kws" "$MODEL" samples/commands.wav > "$T/cmake.txt"
cmp "$T/scan.txt" "$T/cmake.txt" || { echo "embed_kws's detections differ from keyword_spotter scan's:";
                                      diff "$T/scan.txt" "$T/cmake.txt"; exit 1; }

export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
cc -std=c99 -Wall -Werror examples/embed/embed_kws.c -o "$T/embed_pc" $(pkg-config --cflags --libs mega_kws sndfile) \
   -lm -Wl,-rpath,"$LIBDIR"
"$T/embed_pc" "$MODEL" samples/commands.wav > "$T/pc.txt"
cmp "$T/cmake.txt" "$T/pc.txt" || { echo "the pkg-config build of the example printed something else"; exit 1; }

# The README's C example, as printed there: raw float32 audio on stdin (no flush
# at the end, which these words do not need), the detections scan prints.
sed -n '/^<!-- example: c -->$/,/^```$/p' README.md | sed '1,2d;$d' > "$T/readme.c"
[ "$(wc -l < "$T/readme.c")" -ge 8 ] || { echo "no C example found in README.md"; exit 1; }
cc -std=c99 -Wall -Wextra -Werror "$T/readme.c" -o "$T/readme" $(pkg-config --cflags --libs mega_kws) -Wl,-rpath,"$LIBDIR"
sox samples/commands.wav -t f32 - | "$T/readme" "$MODEL" > "$T/readme.txt"
cmp "$T/scan.txt" "$T/readme.txt" || { echo "the README's C example differs from keyword_spotter scan:";
                                       diff "$T/scan.txt" "$T/readme.txt"; exit 1; }

cat > "$T/cpp.cpp" <<'CPP'
#include <mega/engine.hpp>
#include <mega/mega.hpp>
#include <cstdio>
#include <vector>
int main(int argc, char** argv) {
  std::string err;
  auto model = mega::Model::load(argv[1], &err);
  if (!model) { std::fprintf(stderr, "%s\n", err.c_str()); return 1; }
  auto engine = mega::create_engine("cpu", model, mega::EngineOptions{}, &err);
  float diff = 0.0f;
  if (!engine || engine->self_test(&diff) != mega::Status::ok) { std::fprintf(stderr, "%s\n", err.c_str()); return 1; }
  std::vector<float> second(16000, 0.0f);  // as in the README's C++ example
  int chunks = 0;
  if (engine->push_all(second.data(), int64_t(second.size()), [&](const mega::ChunkResult&) { ++chunks; }) !=
      mega::Status::ok) return 1;
  std::printf("C++ API: %zu labels, self-test through the engine: max abs difference %.2g; %d chunks in 1 s\n",
              model->labels().size(), double(diff), chunks);
  return 0;
}
CPP
c++ -std=c++17 -Wall -Werror "$T/cpp.cpp" -o "$T/cpp" $(pkg-config --cflags --libs mega_kws) -Wl,-rpath,"$LIBDIR"
"$T/cpp" "$MODEL"

# Python: Debian's interpreter, the package from the prefix, nothing pointing at the build tree
PYDIR=$P/lib/python3/dist-packages
(cd "$T" && env -u MEGA_KWS_LIBRARY -u MEGA_KWS_MODEL PYTHONPATH="$PYDIR" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c '
import mega_kws, sys
assert mega_kws.__file__.startswith(sys.argv[1]), mega_kws.__file__
assert mega_kws.library_path().startswith(sys.argv[2]), mega_kws.library_path()
m = mega_kws.Model(mega_kws.default_model_path())
print("Python package: %s, %d labels, library %s" % (mega_kws.__file__, m.n_classes, mega_kws.library_path()))
' "$PYDIR" "$P/")
# mega_kws.listen's library (libmega_kws_audio), found beside the installed libmega_kws by itself; listing
# the inputs needs no sound card (none: an empty list)
(cd "$T" && env -u MEGA_KWS_LIBRARY -u MEGA_KWS_AUDIO_LIBRARY PYTHONPATH="$PYDIR" PYTHONDONTWRITEBYTECODE=1 \
   /usr/bin/python3 -c '
import sys, mega_kws, mega_kws._listen as mic
n = len(mega_kws.devices())
assert mic.audio_lib()._name.startswith(sys.argv[1]), mic.audio_lib()._name
print("Python microphone library: %s, %d input device(s)" % (mic.audio_lib()._name, n))
' "$P/")
(cd "$T" && env -u MEGA_KWS_LIBRARY -u MEGA_KWS_MODEL PYTHONPATH="$PYDIR" PYTHONDONTWRITEBYTECODE=1 \
   /usr/bin/python3 -m mega_kws scan "$ROOT/samples/commands.wav") > "$T/py.txt"
cmp "$T/scan.txt" "$T/py.txt" || { echo "python3 -m mega_kws scan differs from keyword_spotter scan:";
                                   diff "$T/scan.txt" "$T/py.txt"; exit 1; }

"$P/bin/keyword_spotter" classify -m "$MODEL" "$P/share/mega_kws/samples/yes.wav" | tee "$T/cli.txt"
grep -q 'yes' "$T/cli.txt"
"$P/bin/mega-convert" tests/fixtures/data/tiny_uni.pt -o "$T/tiny.mega" --labels a,b,c,d >/dev/null
"$P/bin/keyword_spotter" selftest -m "$T/tiny.mega"
if [ -x "$BUILD/bench/mega_rtf" ]; then  # the benchmark, installed beside the CLI where it is built
  "$P/bin/mega_rtf" -m "$MODEL" --backend cpu --seconds 1 --json | grep '"rtf"' >/dev/null ||
    { echo "the installed mega_rtf failed"; exit 1; }
fi
# the installed documentation: every relative link in it resolves inside it
[ -f "$P/share/doc/mega-kws/README.md" ] || { echo "no README.md in share/doc/mega-kws"; exit 1; }
for d in "$P"/share/doc/*/; do
  if compgen -G "$d*.md" >/dev/null; then /usr/bin/python3 scripts/check_doc_links.py "${d%/}"; fi
done
echo "installed package: library, headers, CMake package, pkg-config, C example, Python package, CLI and converter work"
