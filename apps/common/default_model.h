// SPDX-License-Identifier: Apache-2.0
// The model a program uses without -m, found the same way by keyword_spotter,
// mega_rtf and the Python package (mega_kws.default_model_path).
#pragma once

#include <string>

namespace kws {

// $MEGA_KWS_MODEL if set; else the demo model where cmake --install puts it,
// relative to this program (bin/../share/mega_kws/models/sc10-demo.mega);
// else, run from its build tree (any folder of it: build/bench/mega_rtf too),
// the source tree's models/sc10-demo.mega. Empty if none is there; *tried
// lists the paths looked at.
std::string default_model_path(std::string* tried);

}  // namespace kws
