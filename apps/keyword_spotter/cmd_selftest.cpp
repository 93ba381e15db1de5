// SPDX-License-Identifier: Apache-2.0
// selftest: the input/logits pair stored in the model file, run through a
// session (exit 0 if the logits match within the file's tolerance).
#include <cstdio>

#include "cli_output.h"
#include "commands.h"
#include "model_setup.h"

namespace kws {

int cmd_selftest(const Params& p) {
  auto m = load_model(p);
  if (!m) return kExitModel;
  if (m->info().self_test_samples == 0) {
    if (p.json) JsonLine().str("model", p.model_path).boolean("passed", false).str("error", "no self-test").end();
    std::fprintf(stderr, "keyword_spotter: the model file has no self-test\n");
    return kExitFailed;
  }
  auto s = make_session(m, p, m->info().self_test_samples);
  if (!s) return kExitModel;
  float diff = 0.0f;
  const mega::Status st = s->self_test(&diff);
  const bool passed = st == mega::Status::ok;
  if (p.json) {
    JsonLine().str("model", p.model_path).boolean("passed", passed).str("status", mega::status_name(st))
        .num("max_abs_diff", double(diff)).num("tolerance", double(m->self_test_tolerance()))
        .str("backend", s->backend()).end();
  } else if (passed) {
    std::printf("self-test passed: max abs logit difference %.3g (tolerance %.3g)\n", diff, m->self_test_tolerance());
  } else {
    std::printf("self-test FAILED: %s, max abs logit difference %.3g (tolerance %.3g)\n", mega::status_name(st), diff,
                m->self_test_tolerance());
  }
  return passed ? kExitOk : kExitFailed;
}

}  // namespace kws
