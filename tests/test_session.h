// Loading a model and creating a session inside a GoogleTest test.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "mega/mega.hpp"

namespace mega_test {

inline std::shared_ptr<const mega::Model> load(const std::string& path) {
  std::string err;
  auto m = mega::Model::load(path, &err);
  EXPECT_TRUE(m) << path << ": " << err;
  return m;
}

inline std::unique_ptr<mega::Session> session(const std::shared_ptr<const mega::Model>& m,
                                              mega::KernelImpl impl = mega::KernelImpl::optimized,
                                              int32_t n_threads = 1) {
  std::string err;
  mega::SessionOptions o;
  o.kernels = impl;
  o.n_threads = n_threads;
  auto s = mega::Session::create(m, o, &err);
  EXPECT_TRUE(s) << err;
  return s;
}

}  // namespace mega_test
