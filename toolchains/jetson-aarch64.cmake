# SPDX-License-Identifier: Apache-2.0
# Cross-compiling for NVIDIA Jetson (JetPack 6 / L4T r36: Ubuntu 22.04, aarch64,
# CUDA 12.x) from an x86-64 host. docs/jetson.md has the whole recipe.
#
#   cmake -S . -B build-jetson -G Ninja -DCMAKE_TOOLCHAIN_FILE=toolchains/jetson-aarch64.cmake \
#         -DMEGA_SYSROOT=$HOME/jetson-rootfs [-DMEGA_CUDA=ON]
#
# On top of toolchains/aarch64-linux-gnu.cmake (MEGA_SYSROOT, MEGA_CROSS_PREFIX):
#   MEGA_AARCH64_CPU         default cortex-a78ae (Orin's CPU); "" for any armv8-a
#   CMAKE_CUDA_ARCHITECTURES default 87 (Orin); 72 for Xavier (CUDA <= 12 only)
#   MEGA_CUDA_ROOT           the host's CUDA toolkit that also holds the aarch64
#                            target files (NVIDIA's cuda-cross-aarch64 package puts
#                            them in MEGA_CUDA_ROOT/targets/aarch64-linux)
set(MEGA_AARCH64_CPU "cortex-a78ae" CACHE STRING "-mcpu for the target (empty: generic armv8-a)")
include(${CMAKE_CURRENT_LIST_DIR}/aarch64-linux-gnu.cmake)

set(MEGA_CUDA_ROOT /usr/local/cuda CACHE PATH "CUDA toolkit with the aarch64-linux target files")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES MEGA_CUDA_ROOT)
set(CMAKE_CUDA_ARCHITECTURES 87 CACHE STRING "CUDA architectures (87: Jetson Orin)")

# Only used when the project enables CUDA (MEGA_CUDA=ON). nvcc runs on the
# host; the cross g++ compiles the host half of each .cu file; nvcc takes
# headers and libraries from targets/aarch64-linux instead of the host's.
set(CMAKE_CUDA_COMPILER ${MEGA_CUDA_ROOT}/bin/nvcc)
set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
set(CMAKE_CUDA_FLAGS_INIT "--target-directory aarch64-linux")
if(MEGA_SYSROOT)
  string(APPEND CMAKE_CUDA_FLAGS_INIT " -Xcompiler=--sysroot=${MEGA_SYSROOT}")
endif()
