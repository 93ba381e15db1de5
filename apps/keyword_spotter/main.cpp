// SPDX-License-Identifier: Apache-2.0
// keyword_spotter: the command-line front end of the runtime.
//
//   keyword_spotter classify [-m MODEL] [--json] [--block-size N] FILE...
//   keyword_spotter scan     [-m MODEL] [--json] FILE
//   keyword_spotter listen   [-m MODEL] [--device NAME|INDEX] [--json]
//   keyword_spotter devices  [--json]
//   keyword_spotter info     [-m MODEL] [--json]
//   keyword_spotter selftest [-m MODEL] [--json]
//   keyword_spotter --version
// (keyword_spotter COMMAND --help: that command's options.) Every exit goes
// through check_stdout: results that could not be written are an error.
#include <cstdio>
#include <string>

#include "cli_output.h"
#include "commands.h"
#include "mega/engine.hpp"
#include "mega/mega.hpp"

namespace {

int run(const kws::Params& p) {
  if (p.command == "info") return kws::cmd_info(p);
  if (p.command == "selftest") return kws::cmd_selftest(p);
  if (p.command == "classify") return kws::cmd_classify(p);
  if (p.command == "scan") return kws::cmd_scan(p);
  if (p.command == "listen") return kws::cmd_listen(p);
  return kws::cmd_devices(p);
}

}  // namespace

int main(int argc, char** argv) {
  kws::Params p;
  const int rc = kws::parse_args(argc, argv, &p);
  if (rc >= 0) return kws::check_stdout("keyword_spotter", rc);
  mega::set_blas_threads(1);  // engines split the work themselves (--threads)
  if (p.command != "info" && p.command != "devices") {
    kws::resolve_backend(&p);
    std::string why;
    if (!mega::backend_available(p.backend, &why)) {
      std::fprintf(stderr, "keyword_spotter: the %s backend is not available: %s\n", p.backend.c_str(), why.c_str());
      return kws::kExitDevice;
    }
  }
  return kws::check_stdout("keyword_spotter", run(p));
}
