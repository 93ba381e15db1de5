// selftest: the input/logits pair stored in the model file, run through a
// session (exit 0 if the logits match within the file's tolerance).
#include <cstdio>

#include "commands.h"
#include "model_setup.h"

namespace kws {

int cmd_selftest(const Params& p) {
  auto m = load_model(p);
  if (!m) return kExitModel;
  if (m->info().self_test_samples == 0) {
    std::fprintf(stderr, "keyword_spotter: the model file has no self-test\n");
    return kExitFailed;
  }
  auto s = make_session(m, p, m->info().self_test_samples);
  if (!s) return kExitModel;
  float diff = 0.0f;
  const mega::Status st = s->self_test(&diff);
  if (st == mega::Status::ok) {
    std::printf("self-test passed: max abs logit difference %.3g (tolerance %.3g)\n", diff, m->self_test_tolerance());
    return kExitOk;
  }
  std::printf("self-test FAILED: %s, max abs logit difference %.3g (tolerance %.3g)\n", mega::status_name(st), diff,
              m->self_test_tolerance());
  return kExitFailed;
}

}  // namespace kws
