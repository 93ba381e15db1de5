// SPDX-License-Identifier: Apache-2.0
// The model, the session and the detector as the options ask for them; each
// prints its own error and returns null on failure.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cli_options.h"
#include "mega/detector.hpp"
#include "mega/engine.hpp"
#include "mega/mega.hpp"

namespace kws {

std::shared_ptr<const mega::Model> load_model(const Params& p);
std::unique_ptr<mega::Engine> make_session(const std::shared_ptr<const mega::Model>& m, const Params& p,
                                           int64_t max_clip_samples);
// Detector from the model's defaults and the command-line overrides (per-label
// thresholds by name: an unknown label is an error naming it).
std::unique_ptr<mega::Detector> make_detector(const mega::Model& m, const Params& p);

}  // namespace kws
