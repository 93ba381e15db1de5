// SPDX-License-Identifier: Apache-2.0
// keyword_spotter's commands, one per file (cmd_NAME.cpp).
#pragma once

#include "cli_options.h"

namespace kws {

int cmd_info(const Params& p);
int cmd_selftest(const Params& p);
int cmd_classify(const Params& p);
int cmd_scan(const Params& p);
int cmd_listen(const Params& p);
int cmd_devices(const Params& p);

}  // namespace kws
