#!/bin/bash
# The installed package, as a user of it sees it:
#  - cmake --install of BUILD_DIR into a scratch prefix;
#  - examples/embed built from its own build tree with find_package(MegaKWS),
#    and again with a plain compiler line from pkg-config; both stream
#    samples/commands.wav through the C API's detector and must print the
#    detections the installed keyword_spotter scan prints, byte for byte;
#  - a C++ program against the installed C++ headers (mega/engine.hpp);
#  - the installed CLI classifies an installed sample with the installed model;
#  - the installed converter (bin/mega-convert) converts a checkpoint that the
#    installed CLI then self-tests.
# Usage: scripts/test_install.sh [BUILD_DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
P=$T/prefix
cmake --install "$BUILD" --prefix "$P" >/dev/null
LIBDIR=$(dirname "$(find "$P" -name 'libmega_kws.so' | head -1)")
MODEL=$P/share/mega_kws/models/sc10-demo.mega

"$P/bin/keyword_spotter" scan -m "$MODEL" samples/commands.wav > "$T/scan.txt"
for w in yes stop go left no; do
  grep -q "	$w	" "$T/scan.txt" || { echo "keyword_spotter scan never reported '$w'"; cat "$T/scan.txt"; exit 1; }
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

cat > "$T/cpp.cpp" <<'CPP'
#include <mega/engine.hpp>
#include <mega/mega.hpp>
#include <cstdio>
int main(int argc, char** argv) {
  std::string err;
  auto model = mega::Model::load(argv[1], &err);
  if (!model) { std::fprintf(stderr, "%s\n", err.c_str()); return 1; }
  auto engine = mega::create_engine("cpu", model, mega::EngineOptions{}, &err);
  float diff = 0.0f;
  if (!engine || engine->self_test(&diff) != mega::Status::ok) { std::fprintf(stderr, "%s\n", err.c_str()); return 1; }
  std::printf("C++ API: %zu labels, self-test through the engine: max abs difference %.2g\n",
              model->labels().size(), double(diff));
  return 0;
}
CPP
c++ -std=c++17 -Wall -Werror "$T/cpp.cpp" -o "$T/cpp" $(pkg-config --cflags --libs mega_kws) -Wl,-rpath,"$LIBDIR"
"$T/cpp" "$MODEL"

"$P/bin/keyword_spotter" classify -m "$MODEL" "$P/share/mega_kws/samples/yes.wav" | tee "$T/cli.txt"
grep -q 'yes' "$T/cli.txt"
"$P/bin/mega-convert" tests/fixtures/data/tiny_uni.pt -o "$T/tiny.mega" --labels a,b,c,d >/dev/null
"$P/bin/keyword_spotter" selftest -m "$T/tiny.mega"
echo "installed package: library, headers, CMake package, pkg-config, C example, CLI and converter work"
