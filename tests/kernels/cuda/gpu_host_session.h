// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's forward pass on the host (kernels/cuda/host_session.h)
// with the plain host launcher, as the tests use it.
#pragma once

#include "host_session.h"

namespace mega_test {

using HostGpuSession = mega::gpu::HostSession<mega::gpu::HostOps>;

}  // namespace mega_test
