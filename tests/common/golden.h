// SPDX-License-Identifier: Apache-2.0
// Reader for the .golden files written by tests/fixtures/make_fixtures.py.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "mega/mega.hpp"

namespace mega_test {

inline std::string fixture_path(const std::string& name) { return std::string(MEGA_FIXTURES) + "/" + name; }
inline std::string generated_path(const std::string& name) { return std::string(MEGA_GENERATED) + "/" + name; }

struct Golden {
  std::map<std::string, std::vector<float>> arrays;

  bool load(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    char magic[4];
    uint32_t count = 0;
    bool ok = std::fread(magic, 1, 4, f) == 4 && std::string(magic, 4) == "MGLD" && std::fread(&count, 4, 1, f) == 1;
    for (uint32_t i = 0; ok && i < count; ++i) {
      uint32_t len = 0, n = 0;
      ok = std::fread(&len, 4, 1, f) == 1 && len < 256;
      std::string name(len, '\0');
      ok = ok && std::fread(&name[0], 1, len, f) == len && std::fread(&n, 4, 1, f) == 1;
      std::vector<float> data(n);
      ok = ok && std::fread(data.data(), 4, n, f) == n;
      if (ok) arrays[name] = std::move(data);
    }
    std::fclose(f);
    return ok;
  }
  const std::vector<float>& at(const std::string& name) const { return arrays.at(name); }
  bool has(const std::string& name) const { return arrays.count(name) != 0; }
};

// max |a - b| over two equally long arrays (+inf if lengths differ or NaN).
inline double max_abs_diff(const float* a, const float* b, size_t n) {
  double worst = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (std::isnan(d)) return INFINITY;
    worst = d > worst ? d : worst;
  }
  return worst;
}

// Loads a model file (null and a test failure if it does not load).
inline std::shared_ptr<const mega::Model> load_model(const std::string& path) {
  std::string err;
  auto m = mega::Model::load(path, &err);
  EXPECT_TRUE(m) << err;
  return m;
}

// DIR/NAME.mega with its golden arrays from DIR/NAME.golden.
inline std::shared_ptr<const mega::Model> load_fixture(const std::string& dir, const std::string& name, Golden* g) {
  EXPECT_TRUE(g->load(dir + "/" + name + ".golden")) << name;
  return load_model(dir + "/" + name + ".mega");
}

inline std::vector<float> uniform(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& e : v) e = u(rng);
  return v;
}

}  // namespace mega_test
