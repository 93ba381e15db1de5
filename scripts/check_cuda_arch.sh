#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Checks that a CUDA build holds device code for an architecture (default 87,
# Jetson Orin): every kernel object file of BUILD_DIR must embed a cubin that
# ptxas compiled for sm_ARCH (nvcc records "-arch sm_ARCH" in each one), which
# proves the kernels compile for that GPU, not only that PTX was kept.
# Usage: scripts/check_cuda_arch.sh BUILD_DIR [ARCH]
set -euo pipefail
BUILD=$1
ARCH=${2:-87}
objs=$(find "$BUILD/kernels" -name '*.cu.o' | sort)
[ -n "$objs" ] || { echo "no CUDA objects under $BUILD/kernels (configure with -DMEGA_CUDA=ON)"; exit 1; }
n=0
for o in $objs; do
  strings -a "$o" | grep -- "-arch sm_$ARCH " >/dev/null || { echo "$o: no sm_$ARCH device code"; exit 1; }
  n=$((n + 1))
done
echo "sm_$ARCH device code in all $n kernel objects"
