#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The Debian packages (cmake/packaging.cmake), made from an existing build:
#  1. cpack -G DEB in BUILD_DIR makes libmega-kws0, libmega-kws-dev, mega-kws
#     and python3-mega-kws for the build's architecture; their control fields
#     (dpkg-deb -I) must name that architecture and the dependencies on
#     Debian's libopenblas0, libsndfile1, libsamplerate0 and libportaudio2,
#     and their files the library in /usr/lib/<triplet>, the headers, CMake
#     and pkg-config files, the CLI with the demo model, the Python package;
#     lintian must find no error (E:) in them.
#  2. (unless --no-install; root, as in CI) apt-get installs them, then, with
#     nothing pointing at the build or source tree:
#     - the installed keyword_spotter classifies an installed sample WITHOUT -m
#       (it must find the installed demo model itself);
#     - Debian's python3 imports the installed mega_kws, which loads the
#       packaged library and classifies the sample with the default model;
#     - examples/embed builds against the installed package (find_package,
#       then pkg-config) and prints what keyword_spotter scan prints;
#     - every relative link in /usr/share/doc/mega-kws resolves there;
#     - pip install ./python into a venv finds the packaged library without
#       MEGA_KWS_LIBRARY (mega_kws.library_path() is its path), and its
#       metadata names the license (Apache-2.0);
#     and finally removes (purges) the packages again.
# The build must be configured with -DCMAKE_INSTALL_PREFIX=/usr (Debian's
# multiarch library directory). Packages already installed are not touched:
# the install step refuses to run then.
# Usage: scripts/test_packages.sh [--no-install | --installed] [--arch ARCH] [BUILD_DIR]
#   (default build; ARCH: what the packages must say, default dpkg --print-architecture;
#   --installed: the packages are installed already, by you: step 2's checks
#   only, nothing installed or removed)
set -euo pipefail
# (grep without -q in pipelines: -q exits at the first match, and the writer it leaves may die of
# SIGPIPE, which pipefail turns into a failure; a clean-clone CI failed so on a loaded machine)
cd "$(dirname "$0")/.."
INSTALL=1
ARCH=$(dpkg --print-architecture)
while [ $# -gt 0 ]; do
  case $1 in
    --no-install) INSTALL=0; shift ;;
    --installed) INSTALL=2; shift ;;
    --arch) ARCH=$2; shift 2 ;;
    *) break ;;
  esac
done
ROOT=$PWD
fail() { echo "test_packages: $*" >&2; exit 1; }
BUILD=$(cd "${1:-build}" && pwd) || fail "no build directory ${1:-build}"

cache() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt"; }
LIBDIR=$(cache CMAKE_INSTALL_LIBDIR)
[[ "$LIBDIR" =~ ^lib/[a-z0-9_]+-linux-gnu[a-z]*$ ]] ||
  fail "$BUILD installs the library into $LIBDIR: configure it with -DCMAKE_INSTALL_PREFIX=/usr (lib/<triplet>)"
VERSION=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")
[ -n "$VERSION" ] || fail "no project version in $BUILD/CMakeCache.txt"
SOVERSION=${VERSION%%.*}
LIBPKG=libmega-kws$SOVERSION
PKGS=("$LIBPKG" libmega-kws-dev mega-kws python3-mega-kws)

# 1. the packages
rm -f "$BUILD"/*.deb
(cd "$BUILD" && cpack -G DEB -B "$PWD" >/dev/null) || fail "cpack -G DEB failed in $BUILD"
deb() { echo "$BUILD/${1}_${VERSION}_${ARCH}.deb"; }
field() {  # field PACKAGE NAME: a control field of its .deb
  dpkg-deb -f "$(deb "$1")" "$2"
}
for p in "${PKGS[@]}"; do
  [ -f "$(deb "$p")" ] || fail "cpack made no $(deb "$p") (made: $(ls "$BUILD"/*.deb 2>/dev/null | tr '\n' ' '))"
  [ "$(field "$p" Package)" = "$p" ] || fail "$(deb "$p"): Package is $(field "$p" Package)"
  [ "$(field "$p" Architecture)" = "$ARCH" ] || fail "$p: Architecture $(field "$p" Architecture), not $ARCH"
  [ "$(field "$p" Version)" = "$VERSION" ] || fail "$p: Version $(field "$p" Version), not $VERSION"
  echo "$p $VERSION $ARCH: Depends: $(field "$p" Depends)"
done
depends_on() {  # depends_on PACKAGE DEP...: each DEP is one of PACKAGE's dependencies
  local p=$1 d; shift
  for d in "$@"; do
    field "$p" Depends | tr ',' '\n' | sed 's/^ *//; s/ .*//' | grep -x "$d" >/dev/null ||
      fail "$p does not depend on $d: Depends: $(field "$p" Depends)"
  done
}
depends_on "$LIBPKG" libopenblas0 libc6 libstdc++6
depends_on mega-kws "$LIBPKG" libsndfile1 libsamplerate0 libportaudio2 libc6
depends_on libmega-kws-dev "$LIBPKG"
depends_on python3-mega-kws "$LIBPKG" python3 python3-numpy
field mega-kws Depends | grep "$LIBPKG (= $VERSION)" >/dev/null || fail "mega-kws must depend on exactly $LIBPKG $VERSION"
contains() {  # contains PACKAGE PATH...: each PATH is in PACKAGE
  local p=$1 f; shift
  for f in "$@"; do
    dpkg-deb -c "$(deb "$p")" | awk '{print $6}' | grep -x "./$f" >/dev/null || fail "$p lacks /$f"
  done
}
contains "$LIBPKG" "usr/$LIBDIR/libmega_kws.so.$SOVERSION"
contains libmega-kws-dev "usr/$LIBDIR/libmega_kws.so" usr/include/mega/mega_kws.h \
  "usr/$LIBDIR/cmake/MegaKWS/MegaKWSConfig.cmake" "usr/$LIBDIR/pkgconfig/mega_kws.pc"
contains mega-kws usr/bin/keyword_spotter usr/share/mega_kws/models/sc10-demo.mega usr/share/mega_kws/samples/yes.wav
contains mega-kws "usr/$LIBDIR/libmega_kws_audio.so.$SOVERSION"  # mega_kws.listen's; the header is -dev's
contains libmega-kws-dev usr/include/mega/mega_kws_audio.h
contains python3-mega-kws usr/lib/python3/dist-packages/mega_kws/__init__.py \
  usr/lib/python3/dist-packages/mega_kws/_config.py
# each package's license (DEP-5 copyright) and changelog, whose first entry is this version
for p in "${PKGS[@]}"; do contains "$p" "usr/share/doc/$p/copyright" "usr/share/doc/$p/changelog.gz"; done
contains mega-kws usr/share/doc/mega-kws/LICENSE usr/share/doc/mega-kws/NOTICE
top=$(dpkg-deb --fsys-tarfile "$(deb mega-kws)" | tar -xO ./usr/share/doc/mega-kws/changelog.gz | gzip -dc | head -1)
[[ "$top" == "mega-kws ($VERSION) "* ]] ||
  fail "cmake/debian/changelog's first entry is '$top', not version $VERSION: add an entry for $VERSION"
# the library's machine code is the architecture's
X=$(mktemp -d)
dpkg-deb -x "$(deb "$LIBPKG")" "$X"
MACHINE=$(readelf -h "$X/usr/$LIBDIR/libmega_kws.so.$SOVERSION" | sed -n 's/^ *Machine: *//p')
rm -rf "$X"
case $ARCH in amd64) want="X86-64" ;; arm64) want="AArch64" ;; *) want="" ;; esac
[ -z "$want" ] || [[ "$MACHINE" == *"$want"* ]] || fail "$LIBPKG ($ARCH) holds a library for $MACHINE"
dpkg-deb -I "$(deb "$LIBPKG")" shlibs | grep -x "libmega_kws $SOVERSION $LIBPKG (>= $VERSION)" >/dev/null ||
  fail "$LIBPKG has no shlibs entry for libmega_kws.so.$SOVERSION"
# Debian's checks: lintian must report no error (E:) on any package. The few
# warnings that do not apply to a CPack-made package are overridden, each with
# its reason, in cmake/debian/lintian-overrides.
command -v lintian >/dev/null || fail "lintian is not installed (scripts/setup.sh installs it)"
debs=(); for p in "${PKGS[@]}"; do debs+=("$(deb "$p")"); done
if ! lintian --fail-on error --tag-display-limit 0 "${debs[@]}" > "$BUILD/lintian.txt" 2>&1 ||
   grep -q '^E: ' "$BUILD/lintian.txt"; then
  cat "$BUILD/lintian.txt" >&2
  fail "lintian found errors in the packages (above; all of it in $BUILD/lintian.txt)"
fi
echo "lintian: no errors ($(grep -c '^W: ' "$BUILD/lintian.txt" || true) warnings; $BUILD/lintian.txt)"
echo "packages: ${PKGS[*]} ($ARCH) made, control fields and contents as expected"
[ "$INSTALL" -ne 0 ] || exit 0

# 2. installed, used, removed
T=$(mktemp -d)
cleanup() {
  if [ "$INSTALL" -eq 1 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get remove -y -q --purge "${PKGS[@]}" >/dev/null 2>&1 || true
  fi
  rm -rf "$T"
}
if [ "$INSTALL" -eq 1 ]; then
  [ "$(id -u)" -eq 0 ] || fail "installing the packages needs root (or run with --no-install)"
  for p in "${PKGS[@]}"; do
    if dpkg -s "$p" 2>/dev/null | grep "^Status: install ok installed" >/dev/null; then
      fail "$p is already installed here: not touching it (apt-get remove it first)"
    fi
  done
  trap cleanup EXIT
  debs=(); for p in "${PKGS[@]}"; do debs+=("$(deb "$p")"); done
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${debs[@]}" >/dev/null ||
    fail "apt-get install of the packages failed"
else
  trap 'rm -rf "$T"' EXIT
fi

cd "$T"  # nothing of the source tree on any path from here on
unset MEGA_KWS_LIBRARY MEGA_KWS_MODEL PYTHONPATH LD_LIBRARY_PATH
SAMPLE=/usr/share/mega_kws/samples/yes.wav
[ "$(command -v keyword_spotter)" = /usr/bin/keyword_spotter ] || fail "keyword_spotter is not /usr/bin's"
keyword_spotter classify "$SAMPLE" > cli.txt || fail "keyword_spotter classify without -m failed (exit $?)"
grep -q "	yes	" cli.txt || fail "keyword_spotter classify (no -m) did not say yes: $(cat cli.txt)"
echo "installed CLI, no -m: $(cat cli.txt)"

PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 - "$SAMPLE" "/usr/$LIBDIR/" > py.txt <<'PY' || fail "the installed Python package failed"
import sys
import mega_kws
assert mega_kws.__file__.startswith("/usr/lib/python3/dist-packages/mega_kws/"), mega_kws.__file__
assert mega_kws.library_path().startswith(sys.argv[2]), mega_kws.library_path()
r = mega_kws.classify_file(sys.argv[1])  # the default model: the installed demo model
assert r.label == "yes", r
print("installed Python package: %s loads %s; %s -> %s" % (mega_kws.__file__, mega_kws.library_path(), sys.argv[1], r.label))
PY
cat py.txt

keyword_spotter scan -m /usr/share/mega_kws/models/sc10-demo.mega "$ROOT/samples/commands.wav" > scan.txt
[ -s scan.txt ] || fail "the installed keyword_spotter scan found nothing"
cmake -S "$ROOT/examples/embed" -B embed -G Ninja >/dev/null || fail "examples/embed: find_package(MegaKWS) failed"
cmake --build embed >/dev/null
./embed/embed_kws /usr/share/mega_kws/models/sc10-demo.mega "$ROOT/samples/commands.wav" > embed.txt
cmp scan.txt embed.txt || fail "examples/embed against the packages differs from keyword_spotter scan"
cc -std=c99 -Wall -Werror "$ROOT/examples/embed/embed_kws.c" -o embed_pc $(pkg-config --cflags --libs mega_kws sndfile) -lm
./embed_pc /usr/share/mega_kws/models/sc10-demo.mega "$ROOT/samples/commands.wav" > pc.txt
cmp scan.txt pc.txt || fail "examples/embed built with pkg-config differs from keyword_spotter scan"
echo "examples/embed against the packages (CMake and pkg-config): the detections of keyword_spotter scan"
/usr/bin/python3 "$ROOT/scripts/check_doc_links.py" /usr/share/doc/mega-kws   # the installed documentation's links

# pip install ./python (a copy: pip builds in the tree) finds the packaged library
cp -r "$ROOT/python" pysrc
rm -rf pysrc/build pysrc/*.egg-info pysrc/mega_kws/_config.py
/usr/bin/python3 -m venv --system-site-packages venv
./venv/bin/python -m pip install -q --no-build-isolation --no-index ./pysrc > pip.txt 2>&1 ||
  { cat pip.txt; fail "pip install ./python failed"; }
./venv/bin/python - "$PWD/venv/" "/usr/$LIBDIR/libmega_kws.so.$SOVERSION" <<'PY' || fail "pip's mega_kws did not find the packaged library"
import sys
import mega_kws
assert mega_kws.__file__.startswith(sys.argv[1]), mega_kws.__file__  # the venv's, not the Debian package's
assert mega_kws.library_path() == sys.argv[2], mega_kws.library_path()
import importlib.metadata
assert importlib.metadata.metadata("mega-kws")["License"] == "Apache-2.0", importlib.metadata.metadata("mega-kws")["License"]
print("pip install ./python: %s uses %s" % (mega_kws.__file__, mega_kws.library_path()))
PY

cd "$ROOT"
if [ "$INSTALL" -eq 2 ]; then echo "installed packages: CLI (no -m), Python package, C example, pip install ./python"; exit 0; fi
cleanup
trap - EXIT
for p in "${PKGS[@]}"; do
  if dpkg -s "$p" 2>/dev/null | grep "^Status: install ok installed" >/dev/null; then fail "$p is still installed"; fi
done
[ ! -e "/usr/$LIBDIR/libmega_kws.so.$SOVERSION" ] || fail "/usr/$LIBDIR/libmega_kws.so.$SOVERSION is still there"
echo "Debian packages: built, installed, CLI (no -m), Python package, C example, pip install ./python, removed"
