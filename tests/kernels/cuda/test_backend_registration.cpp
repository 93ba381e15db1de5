// SPDX-License-Identifier: Apache-2.0
// The CUDA backend reaches the engine factory through the core's backend.h. This
// test program links it statically (mega_cuda), so it registers it here,
// before any test runs, as a program embedding a backend would; the other
// CUDA tests then create their engines through mega::create_engine("cuda").
#include <gtest/gtest.h>

#include "backend.h"

namespace {

const bool g_registered = mega::register_backend(mega_kws_backend());

TEST(CudaBackend, RegistersOnceByName) {
  EXPECT_TRUE(g_registered);
  const mega::BackendInterface* b = mega_kws_backend();
  ASSERT_NE(b, nullptr);
  EXPECT_STREQ(b->name, "cuda");
  EXPECT_STREQ(b->abi, MEGA_KWS_VERSION_STRING);
  EXPECT_FALSE(mega::register_backend(b));  // the name is taken
  EXPECT_FALSE(mega::register_backend(nullptr));
  mega::BackendInterface incomplete;  // no functions
  incomplete.name = "incomplete";
  EXPECT_FALSE(mega::register_backend(&incomplete));
  std::string why;
  EXPECT_FALSE(mega::backend_available("incomplete", &why));
  EXPECT_NE(why.find("unknown backend"), std::string::npos) << why;
}

}  // namespace
