// The C API: status codes, NULL handling, and the same numbers as C++.
#include <gtest/gtest.h>

#include <cstring>

#include "golden.h"
#include "mega/mega_kws.h"

TEST(CApi, LoadClassifyStreamSelfTest) {
  mega_status st = MEGA_ERR_IO;
  mega_model* m = mega_model_load(mega_test::fixture_path("tiny_uni.mega").c_str(), &st);
  ASSERT_NE(m, nullptr) << mega_load_error();
  EXPECT_EQ(st, MEGA_OK);
  EXPECT_EQ(mega_model_n_classes(m), 4);
  EXPECT_STREQ(mega_model_label(m, 0), "class0");
  EXPECT_EQ(mega_model_label(m, 4), nullptr);
  EXPECT_EQ(mega_model_label(m, -1), nullptr);
  EXPECT_EQ(mega_model_streamable(m), 1);
  mega_session* s = mega_session_create(m, &st);
  ASSERT_NE(s, nullptr);
  mega_test::Golden g;
  ASSERT_TRUE(g.load(mega_test::fixture_path("tiny_uni.golden")));
  const auto& in = g.at("input");
  float logits[4];
  ASSERT_EQ(mega_session_classify(s, in.data(), int64_t(in.size()), logits), MEGA_OK);
  EXPECT_LE(mega_test::max_abs_diff(logits, g.at("logits").data(), 4), 2e-5);
  // stream in blocks of 3; compare the last chunk's window logits
  const auto& want = g.at("chunk_logits");
  size_t off = 0;
  int chunks = 0;
  while (off < in.size()) {
    int64_t used = 0;
    int32_t done = 0;
    ASSERT_EQ(mega_session_push(s, in.data() + off, std::min<int64_t>(3, int64_t(in.size() - off)), &used, &done,
                                logits),
              MEGA_OK);
    off += size_t(used);
    if (done) {
      EXPECT_LE(mega_test::max_abs_diff(logits, want.data() + 4 * chunks, 4), 2e-5);
      ++chunks;
    }
  }
  EXPECT_EQ(chunks * 4, int(want.size()));
  float diff = -1.0f;
  EXPECT_EQ(mega_session_self_test(s, &diff), MEGA_OK);
  mega_session_free(s);
  mega_model_free(m);
}

TEST(CApi, ErrorsAreStatusCodes) {
  mega_status st = MEGA_OK;
  EXPECT_EQ(mega_model_load("/nonexistent.mega", &st), nullptr);
  EXPECT_EQ(st, MEGA_ERR_IO);
  EXPECT_NE(std::strstr(mega_load_error(), "cannot open"), nullptr);
  EXPECT_EQ(mega_model_load(nullptr, &st), nullptr);
  EXPECT_EQ(st, MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_model_load(mega_test::fixture_path("bad_schema_newer.mega").c_str(), &st), nullptr);
  EXPECT_EQ(st, MEGA_ERR_UNSUPPORTED_MODEL);
  EXPECT_EQ(mega_session_create(nullptr, &st), nullptr);
  EXPECT_EQ(st, MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_session_classify(nullptr, nullptr, 0, nullptr), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(mega_status_string(MEGA_ERR_BAD_MODEL), "bad model file");
  mega_model_free(nullptr);
  mega_session_free(nullptr);
  mega_model* m = mega_model_load(mega_test::fixture_path("tiny_bi.mega").c_str(), &st);
  ASSERT_NE(m, nullptr);
  mega_session* s = mega_session_create(m, &st);
  float x[3] = {0, 0, 0};
  int64_t used = 0;
  int32_t done = 0;
  EXPECT_EQ(mega_session_push(s, x, 3, &used, &done, nullptr), MEGA_ERR_NOT_STREAMABLE);
  mega_session_free(s);
  mega_model_free(m);
}
