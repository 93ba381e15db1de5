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

// Session options: two CPU threads stream the same logits as one; "auto"
// resolves to a backend this build and machine have; bad options and a
// backend that is not there are refused with a status and a message.
TEST(CApi, SessionOptions) {
  mega_status st = MEGA_ERR_IO;
  mega_model* m = mega_model_load(mega_test::fixture_path("tiny_uni.mega").c_str(), &st);
  ASSERT_NE(m, nullptr) << mega_load_error();
  mega_test::Golden g;
  ASSERT_TRUE(g.load(mega_test::fixture_path("tiny_uni.golden")));
  const auto& in = g.at("input");

  mega_session_options o;
  std::memset(&o, 0xff, sizeof o);
  mega_session_options_init(&o);
  EXPECT_STREQ(o.backend, "cpu");
  EXPECT_EQ(o.n_threads, 1);
  EXPECT_EQ(o.fp16, 0);
  EXPECT_EQ(o.device, 0);

  auto stream = [&](mega_session* s) {  // the window logits of every chunk, streamed in blocks of 7
    std::vector<float> out;
    float logits[4];
    for (size_t off = 0; off < in.size();) {
      int64_t used = 0;
      int32_t done = 0;
      EXPECT_EQ(mega_session_push(s, in.data() + off, std::min<int64_t>(7, int64_t(in.size() - off)), &used,
                                  &done, logits),
                MEGA_OK);
      if (used == 0) break;
      off += size_t(used);
      if (done) out.insert(out.end(), logits, logits + 4);
    }
    return out;
  };
  mega_session* one = mega_session_create_with_options(m, &o, &st);
  ASSERT_NE(one, nullptr) << mega_load_error();
  EXPECT_STREQ(mega_session_backend(one), "cpu");
  o.n_threads = 2;
  mega_session* two = mega_session_create_with_options(m, &o, &st);
  ASSERT_NE(two, nullptr) << mega_load_error();
  const std::vector<float> a = stream(one), b = stream(two);
  ASSERT_EQ(a.size(), g.at("chunk_logits").size());
  EXPECT_EQ(a, b);
  EXPECT_LE(mega_test::max_abs_diff(a.data(), g.at("chunk_logits").data(), int(a.size())), 2e-5);
  mega_session_free(one);
  mega_session_free(two);

  o.backend = "auto";
  o.n_threads = 1;
  mega_session* any = mega_session_create_with_options(m, &o, &st);
  ASSERT_NE(any, nullptr) << mega_load_error();
  EXPECT_TRUE(std::strcmp(mega_session_backend(any), "cpu") == 0 || std::strcmp(mega_session_backend(any), "cuda") == 0);
  mega_session_free(any);

  o.backend = "tpu";
  EXPECT_EQ(mega_session_create_with_options(m, &o, &st), nullptr);
  EXPECT_EQ(st, MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(mega_load_error(), "unknown backend 'tpu'"), nullptr);
  o.backend = "cpu";
  for (int32_t bad : {0, 17, -1}) {
    o.n_threads = bad;
    EXPECT_EQ(mega_session_create_with_options(m, &o, &st), nullptr);
    EXPECT_EQ(st, MEGA_ERR_INVALID_ARGUMENT);
  }
  o.n_threads = 1;
  o.fp16 = 2;
  EXPECT_EQ(mega_session_create_with_options(m, &o, &st), nullptr);
  EXPECT_EQ(st, MEGA_ERR_INVALID_ARGUMENT);

  // cuda: a session when this build and machine have a GPU, else NO_DEVICE with the reason
  mega_session_options_init(&o);
  o.backend = "cuda";
  mega_session* gpu = mega_session_create_with_options(m, &o, &st);
  if (gpu) {
    EXPECT_STREQ(mega_session_backend(gpu), "cuda");
    mega_session_free(gpu);
  } else {
    EXPECT_EQ(st, MEGA_ERR_NO_DEVICE);
    EXPECT_GT(std::strlen(mega_load_error()), 0u);
  }
  mega_model_free(m);
}
