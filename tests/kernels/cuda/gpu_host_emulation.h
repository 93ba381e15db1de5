// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's forward pass on the host (kernels/cuda/host_emulation.h)
// with the plain host launcher, as the tests use it.
#pragma once

#include "host_emulation.h"

namespace mega_test {

using HostGpuEmulation = mega::gpu::HostEmulation<mega::gpu::HostOps>;

}  // namespace mega_test
