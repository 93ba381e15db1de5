// SPDX-License-Identifier: Apache-2.0
// How the engine factory finds a backend by name
// (backend_registry.cpp; the interface a backend provides: core/backend.h).
#pragma once

#include <string>

#include "core/backend.h"

namespace mega {

// The backend of that name, registered or loaded now; null with the reason
// in *why (not built, module missing, no GPU, unknown name).
const BackendInterface* find_backend(const std::string& name, std::string* why);

}  // namespace mega
