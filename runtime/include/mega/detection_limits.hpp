// SPDX-License-Identifier: Apache-2.0
// The ranges of the detection settings, defined once: the loader checks a
// model's stored defaults against them (runtime/src/model.cpp),
// Detector::create and the overrides check the settings (detector.cpp), and
// keyword_spotter its options. A threshold is in (0, 1] (threshold_in_range).
// The converter and the Python package keep Python copies, which
// tests/test_detection_limits.py checks against this file by parsing it: keep
// each as `constexpr int32_t kName = number;`.
#pragma once

#include <cstdint>

namespace mega {

constexpr int32_t kMinSmoothingHops = 1;     // posteriors averaged over this many hops ...
constexpr int32_t kMaxSmoothingHops = 1024;  // ... at most (the history is n_labels x this)
constexpr int32_t kMinRefractoryMs = 0;
constexpr int32_t kMaxRefractoryMs = 600000;  // ten minutes

// Whether t is a usable threshold, in (0, 1]; false for NaN.
constexpr bool threshold_in_range(float t) { return t > 0.0f && t <= 1.0f; }

}  // namespace mega
