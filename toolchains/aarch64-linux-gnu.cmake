# SPDX-License-Identifier: Apache-2.0
# Cross-compiling for 64-bit ARM Linux (aarch64) with a GNU cross toolchain.
#
# The target's libraries come from one of:
#  - Debian/Ubuntu multiarch (the default): arm64 -dev packages installed next to
#    the host's ones (scripts/setup_cross.sh installs them);
#  - a sysroot: -DMEGA_SYSROOT=/path/to/rootfs, a copy of the target's root file
#    system (for a Jetson, see docs/jetson.md).
#
#   cmake -S . -B build-arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=toolchains/aarch64-linux-gnu.cmake
#
# Options (cache variables, set with -D on the first configure):
#   MEGA_CROSS_PREFIX  prefix of the compiler executables (default aarch64-linux-gnu-;
#                      may include a directory: /opt/gcc-arm/bin/aarch64-none-linux-gnu-)
#   MEGA_SYSROOT       target root file system (default: none, multiarch packages)
#   MEGA_AARCH64_CPU   -mcpu value (default: none, plain armv8-a code)
# When qemu-user is installed, target programs (tests, gtest discovery) run
# through it (CMAKE_CROSSCOMPILING_EMULATOR), so ctest works on the host.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(MEGA_CROSS_PREFIX "aarch64-linux-gnu-" CACHE STRING "Prefix of the cross compiler's executables")
set(MEGA_SYSROOT "" CACHE PATH "Target root file system (empty: multiarch packages on this host)")
set(MEGA_AARCH64_CPU "" CACHE STRING "-mcpu for the target (empty: generic armv8-a)")
# try_compile() projects read this file again without the cache.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES MEGA_CROSS_PREFIX MEGA_SYSROOT MEGA_AARCH64_CPU)

set(CMAKE_C_COMPILER ${MEGA_CROSS_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${MEGA_CROSS_PREFIX}g++)
if(MEGA_AARCH64_CPU)
  set(CMAKE_C_FLAGS_INIT "-mcpu=${MEGA_AARCH64_CPU}")
  set(CMAKE_CXX_FLAGS_INIT "-mcpu=${MEGA_AARCH64_CPU}")
endif()
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Programs (flatc, python) are the host's; libraries, headers and CMake
# packages only the target's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

if(MEGA_SYSROOT)
  set(CMAKE_SYSROOT ${MEGA_SYSROOT})
  set(CMAKE_FIND_ROOT_PATH ${MEGA_SYSROOT})
  set(ENV{PKG_CONFIG_SYSROOT_DIR} ${MEGA_SYSROOT})
  set(ENV{PKG_CONFIG_LIBDIR}
      "${MEGA_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${MEGA_SYSROOT}/usr/lib/pkgconfig:${MEGA_SYSROOT}/usr/share/pkgconfig")
else()
  set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
endif()
set(ENV{PKG_CONFIG_PATH} "")  # nothing from the host

find_program(MEGA_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(MEGA_QEMU_AARCH64)
  # Where qemu finds the target's loader and libraries. With arm64 multiarch
  # packages installed (libc6:arm64), the host's /lib holds the target loader
  # and every library: no -L. "-L /usr/aarch64-linux-gnu" would pair the cross
  # toolchain's older libc with the multiarch libraries, and then any program
  # that starts a thread (OpenBLAS's pool, our workers) hangs under qemu.
  if(MEGA_SYSROOT)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${MEGA_QEMU_AARCH64} -L ${MEGA_SYSROOT})
  elseif(EXISTS /lib/ld-linux-aarch64.so.1)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${MEGA_QEMU_AARCH64})
  else()
    set(CMAKE_CROSSCOMPILING_EMULATOR ${MEGA_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
  endif()
  # for scripts that run target programs themselves (scripts/test_cross.sh)
  set(MEGA_EMULATOR "${CMAKE_CROSSCOMPILING_EMULATOR}" CACHE INTERNAL "How target programs run here")
endif()
