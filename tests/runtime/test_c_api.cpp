// SPDX-License-Identifier: Apache-2.0
// The C API: status codes, NULL handling, and the same numbers as C++; the
// detector finds what keyword_spotter scan finds, at the same times.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <cmath>
#include <cstring>
#include <ostream>
#include <vector>

#include "golden.h"
#include "mega/detector.hpp"
#include "mega/engine.hpp"
#include "mega/mega_kws.h"
#include "test_stream.h"

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

// One version everywhere: project(... VERSION) in the top-level CMakeLists.txt,
// which defines MEGA_KWS_VERSION_STRING for this test too.
TEST(CApi, VersionIsTheProjects) {
  const char* v = mega_version();
  ASSERT_NE(v, nullptr);
  EXPECT_GT(std::strlen(v), 0u);
  EXPECT_STREQ(v, MEGA_KWS_VERSION_STRING);
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

// ---- The detector in the C API ----

namespace {

// samples/*.wav are 16-bit PCM mono: read them as libsndfile does (x / 32768).
std::vector<float> read_pcm16_wav(const std::string& path, int32_t* rate) {
  std::vector<float> out;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return out;
  char riff[12];
  bool ok = std::fread(riff, 1, 12, f) == 12 && std::memcmp(riff, "RIFF", 4) == 0 && std::memcmp(riff + 8, "WAVE", 4) == 0;
  int16_t format = 0, channels = 0, bits = 0;
  while (ok) {
    char id[4];
    uint32_t size = 0;
    if (std::fread(id, 1, 4, f) != 4 || std::fread(&size, 4, 1, f) != 1) break;
    std::vector<char> body(size);
    if (std::fread(body.data(), 1, size, f) != size) break;
    if (size & 1) std::fseek(f, 1, SEEK_CUR);
    if (std::memcmp(id, "fmt ", 4) == 0 && size >= 16) {
      std::memcpy(&format, &body[0], 2);
      std::memcpy(&channels, &body[2], 2);
      std::memcpy(rate, &body[4], 4);
      std::memcpy(&bits, &body[14], 2);
    } else if (std::memcmp(id, "data", 4) == 0 && format == 1 && channels == 1 && bits == 16) {
      out.resize(size / 2);
      for (size_t i = 0; i < out.size(); ++i) {
        int16_t v;
        std::memcpy(&v, &body[2 * i], 2);
        out[i] = float(v) / 32768.0f;
      }
    }
  }
  std::fclose(f);
  return out;
}

struct Found {
  int32_t label;
  float score;
  double time_s;
  int64_t hop;
  bool operator==(const Found& o) const {
    return label == o.label && score == o.score && time_s == o.time_s && hop == o.hop;
  }
};

std::ostream& operator<<(std::ostream& os, const Found& f) {
  return os << "{" << f.label << " " << f.score << " " << f.time_s << " s, hop " << f.hop << "}";
}

// What keyword_spotter scan does (apps/keyword_spotter/cmd_scan.cpp and
// stream_pipeline.cpp), through the C++ API: blocks of samples, then the last
// partial chunk completed with zeros and, unless it fired, the detector's finish().
std::vector<Found> scan_cpp(const std::shared_ptr<const mega::Model>& m, const std::vector<float>& audio,
                            const mega::DetectorOverrides& o) {
  std::string err;
  auto s = mega::create_engine("cpu", m, {}, &err);
  auto det = mega::Detector::for_model(*m, o, &err);
  EXPECT_TRUE(s && det) << err;
  std::vector<Found> out;
  if (!s || !det) return out;
  const mega::HParams& hp = m->hparams();
  auto on_chunk = [&](const mega::ChunkResult& r) {
    mega::Detection d;
    if (det->update(r.logits, &d)) {
      out.push_back({d.label, d.score, mega::Detector::event_time_s(d, r.end_sample, hp.chunk_samples(), hp.sample_rate),
                     d.hop_index});
    }
  };
  const int64_t n = int64_t(audio.size());
  for (int64_t off = 0; off < n; off += 8192) {
    EXPECT_EQ(s->push_all(audio.data() + off, std::min<int64_t>(8192, n - off), on_chunk), mega::Status::ok);
  }
  const int64_t tail = (hp.chunk_samples() - n % hp.chunk_samples()) % hp.chunk_samples();
  std::vector<float> zeros(size_t(tail), 0.0f);
  const size_t before = out.size();
  if (tail) {
    EXPECT_EQ(s->push_all(zeros.data(), tail, on_chunk), mega::Status::ok);
  }
  mega::Detection d;
  if (out.size() == before && det->finish(&d)) {  // the smoothing's end
    out.push_back({d.label, d.score,
                   mega::Detector::event_time_s(d, s->last_result().end_sample, hp.chunk_samples(), hp.sample_rate),
                   d.hop_index});
  }
  return out;
}

// The same through mega_session_detect in blocks of `block` samples, then mega_session_detect_flush.
std::vector<Found> scan_c(mega_session* s, mega_detector* d, const std::vector<float>& audio, int64_t block,
                          const mega_model* m) {
  std::vector<Found> out;
  const int64_t chunk = mega_model_chunk_samples(m);
  const int32_t capacity = int32_t(block / chunk + 1);
  std::vector<mega_detection> found(static_cast<size_t>(capacity));
  auto take = [&](int32_t n) {
    for (int32_t i = 0; i < n; ++i) {
      const mega_detection& x = found[size_t(i)];
      EXPECT_STREQ(x.label, mega_model_label(m, x.label_index));
      out.push_back({x.label_index, x.score, x.time_s, x.hop_index});
    }
  };
  const int64_t n = int64_t(audio.size());
  for (int64_t off = 0; off < n; off += block) {
    int32_t got = -1;
    EXPECT_EQ(mega_session_detect(s, d, audio.data() + off, std::min(block, n - off), found.data(), capacity, &got),
              MEGA_OK);
    take(got);
  }
  int32_t got = -1;
  EXPECT_EQ(mega_session_detect_flush(s, d, found.data(), capacity, &got), MEGA_OK);
  take(got);
  return out;
}

// The same through mega_session_push and mega_detector_update, then zeros to the chunk's end.
std::vector<Found> scan_c_update(mega_session* s, mega_detector* d, const std::vector<float>& audio,
                                 const mega_model* m) {
  std::vector<Found> out;
  std::vector<float> logits(size_t(mega_model_n_classes(m)));
  const int64_t chunk = mega_model_chunk_samples(m);
  std::vector<float> padded = audio;
  padded.resize(size_t((int64_t(audio.size()) + chunk - 1) / chunk * chunk), 0.0f);
  for (size_t off = 0; off < padded.size();) {
    int64_t used = 0;
    int32_t done = 0, fired = 0;
    EXPECT_EQ(mega_session_push(s, padded.data() + off, std::min<int64_t>(1000, int64_t(padded.size() - off)), &used,
                                &done, logits.data()),
              MEGA_OK);
    if (used == 0) break;
    off += size_t(used);
    mega_detection x;
    if (done && mega_detector_update(d, logits.data(), &x, &fired) == MEGA_OK && fired) {
      out.push_back({x.label_index, x.score, x.time_s, x.hop_index});
    }
  }
  return out;
}

std::string demo_model() { return std::string(MEGA_MODELS) + "/sc10-demo.mega"; }

}  // namespace

// Defaults come from the model file; every override lands where the C++
// detector (and so keyword_spotter's flags) puts it.
TEST(CApiDetector, DefaultsAndOverrides) {
  mega_status st = MEGA_ERR_IO;
  mega_model* m = mega_model_load(demo_model().c_str(), &st);
  ASSERT_NE(m, nullptr) << mega_load_error();
  std::string err;
  auto cm = mega::Model::load(demo_model(), &err);
  ASSERT_TRUE(cm) << err;
  const mega::DetectionDefaults& def = cm->info().detection;
  ASSERT_EQ(def.thresholds.size(), 12u);

  mega_detector_options o;
  std::memset(&o, 0x7f, sizeof o);
  mega_detector_options_init(&o);
  EXPECT_EQ(o.struct_size, sizeof(mega_detector_options));
  EXPECT_EQ(o.thresholds, nullptr);
  EXPECT_EQ(o.n_thresholds, 0);
  EXPECT_LT(o.threshold, 0.0f);
  EXPECT_LT(o.smoothing_hops, 0);
  EXPECT_LT(o.refractory_ms, 0);
  EXPECT_LT(o.sensitivity, 0.0f);

  // sensitivity 0.5 keeps the stored thresholds exactly, the 1.0 of _silence_ and _unknown_ included (issue 85 item 6)
  mega_detector_options half = o;
  half.sensitivity = 0.5f;
  float thr[12];
  int32_t smoothing = 0, refractory = 0;
  for (const mega_detector_options* opts : {static_cast<const mega_detector_options*>(nullptr),
                                            static_cast<const mega_detector_options*>(&o),
                                            static_cast<const mega_detector_options*>(&half)}) {
    mega_detector* d = mega_detector_create(m, opts, &st);
    ASSERT_NE(d, nullptr) << mega_load_error();
    EXPECT_EQ(st, MEGA_OK);
    ASSERT_EQ(mega_detector_settings(d, thr, &smoothing, &refractory), MEGA_OK);
    EXPECT_EQ(std::vector<float>(thr, thr + 12), def.thresholds);
    EXPECT_EQ(smoothing, def.smoothing_hops);
    EXPECT_EQ(refractory, def.refractory_ms);
    mega_detector_free(d);
  }

  // one threshold for all, then the sensitivity on top (--threshold 0.9 --sensitivity 0.8: 0.6)
  o.threshold = 0.9f;
  o.sensitivity = 0.8f;
  o.smoothing_hops = 3;
  o.refractory_ms = 0;
  mega_detector* d = mega_detector_create(m, &o, &st);
  ASSERT_NE(d, nullptr) << mega_load_error();
  ASSERT_EQ(mega_detector_settings(d, thr, &smoothing, &refractory), MEGA_OK);
  for (float t : thr) EXPECT_FLOAT_EQ(t, 0.6f);
  EXPECT_EQ(smoothing, 3);
  EXPECT_EQ(refractory, 0);
  mega_detector_free(d);

  // thresholds per label
  mega_detector_options_init(&o);
  float mine[12];
  for (int i = 0; i < 12; ++i) mine[i] = 0.05f + 0.07f * float(i);
  o.thresholds = mine;
  o.n_thresholds = 12;
  d = mega_detector_create(m, &o, &st);
  ASSERT_NE(d, nullptr) << mega_load_error();
  ASSERT_EQ(mega_detector_settings(d, thr, nullptr, nullptr), MEGA_OK);
  EXPECT_EQ(std::vector<float>(thr, thr + 12), std::vector<float>(mine, mine + 12));
  mega_detector_free(d);
  mega_model_free(m);
}

TEST(CApiDetector, InvalidOptionsAreRefused) {
  mega_status st = MEGA_OK;
  mega_model* m = mega_model_load(demo_model().c_str(), &st);
  ASSERT_NE(m, nullptr) << mega_load_error();
  float twelve[12], eleven[11];
  for (float& t : twelve) t = 0.5f;
  for (float& t : eleven) t = 0.5f;
  struct Case {
    const char* what;
    void (*set)(mega_detector_options*, float*, float*);
    const char* message;  // part of mega_load_error()
  };
  const Case cases[] = {
      {"not initialized", [](mega_detector_options* o, float*, float*) { o->struct_size = 0; }, "struct_size"},
      {"threshold 0", [](mega_detector_options* o, float*, float*) { o->threshold = 0.0f; }, "threshold"},
      {"threshold 1.5", [](mega_detector_options* o, float*, float*) { o->threshold = 1.5f; }, "threshold"},
      {"threshold NaN", [](mega_detector_options* o, float*, float*) { o->threshold = NAN; }, "threshold"},
      {"11 thresholds",
       [](mega_detector_options* o, float*, float* e) {
         o->thresholds = e;
         o->n_thresholds = 11;
       },
       "need 12 thresholds"},
      {"a threshold of 0",
       [](mega_detector_options* o, float* t, float*) {
         t[3] = 0.0f;
         o->thresholds = t;
         o->n_thresholds = 12;
       },
       "thresholds must be in (0, 1]"},
      {"thresholds and threshold",
       [](mega_detector_options* o, float* t, float*) {
         o->thresholds = t;
         o->n_thresholds = 12;
         o->threshold = 0.5f;
       },
       "not both"},
      {"count without thresholds", [](mega_detector_options* o, float*, float*) { o->n_thresholds = 12; },
       "n_thresholds"},
      {"smoothing 0", [](mega_detector_options* o, float*, float*) { o->smoothing_hops = 0; }, "smoothing"},
      {"smoothing 1025", [](mega_detector_options* o, float*, float*) { o->smoothing_hops = 1025; }, "smoothing"},
      {"refractory 600001", [](mega_detector_options* o, float*, float*) { o->refractory_ms = 600001; },
       "refractory"},
      {"sensitivity 1.5", [](mega_detector_options* o, float*, float*) { o->sensitivity = 1.5f; }, "sensitivity"},
      {"sensitivity NaN", [](mega_detector_options* o, float*, float*) { o->sensitivity = NAN; }, "sensitivity"},
  };
  for (const Case& c : cases) {
    mega_detector_options o;
    mega_detector_options_init(&o);
    c.set(&o, twelve, eleven);
    st = MEGA_OK;
    EXPECT_EQ(mega_detector_create(m, &o, &st), nullptr) << c.what;
    EXPECT_EQ(st, MEGA_ERR_INVALID_ARGUMENT) << c.what;
    EXPECT_NE(std::strstr(mega_load_error(), c.message), nullptr) << c.what << ": " << mega_load_error();
    twelve[3] = 0.5f;
  }
  EXPECT_EQ(mega_detector_create(nullptr, nullptr, &st), nullptr);
  EXPECT_EQ(st, MEGA_ERR_INVALID_ARGUMENT);
  mega_detector_free(nullptr);
  mega_detector_reset(nullptr);

  // the calls refuse null pointers, short output arrays and a detector of other labels
  mega_session* s = mega_session_create(m, &st);
  mega_detector* d = mega_detector_create(m, nullptr, &st);
  ASSERT_TRUE(s && d) << mega_load_error();
  std::vector<float> audio(16000, 0.0f);
  mega_detection found[8];
  int32_t n = -1, fired = -1;
  float logits[12] = {};
  EXPECT_EQ(mega_detector_update(nullptr, logits, found, &fired), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_detector_update(d, nullptr, found, &fired), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_detector_update(d, logits, found, nullptr), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_detector_settings(nullptr, nullptr, nullptr, nullptr), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_session_detect(nullptr, d, audio.data(), 16000, found, 8, &n), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_session_detect(s, nullptr, audio.data(), 16000, found, 8, &n), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_session_detect(s, d, nullptr, 16000, found, 8, &n), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_session_detect(s, d, audio.data(), -1, found, 8, &n), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_session_detect(s, d, audio.data(), 16000, found, 8, nullptr), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_session_detect(s, d, audio.data(), 16000, nullptr, 8, &n), MEGA_ERR_INVALID_ARGUMENT);
  // 16000 samples complete 4 chunks of 4000: 3 places are refused, and nothing is consumed
  const int64_t chunk = mega_model_chunk_samples(m);
  ASSERT_EQ(chunk, 4000);
  EXPECT_EQ(mega_session_detect(s, d, audio.data(), 16000, found, 3, &n), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_session_detect(s, d, audio.data(), 3999, nullptr, 0, &n), MEGA_OK);  // no chunk completes
  EXPECT_EQ(n, 0);
  EXPECT_EQ(mega_session_detect(s, d, audio.data(), 1, nullptr, 0, &n), MEGA_ERR_INVALID_ARGUMENT);  // one would
  EXPECT_EQ(mega_session_detect(s, d, audio.data(), 1, found, 1, &n), MEGA_OK);
  EXPECT_EQ(mega_session_detect(s, d, audio.data(), 3999, nullptr, 0, &n), MEGA_OK);  // aligned again
  EXPECT_EQ(mega_session_detect_flush(s, d, nullptr, 0, &n), MEGA_ERR_INVALID_ARGUMENT);  // 3999 pending
  EXPECT_EQ(mega_session_detect_flush(s, d, found, 1, &n), MEGA_OK);
  // nothing pending now, but the detector has seen hops: its finish() may still fire
  EXPECT_EQ(mega_session_detect_flush(s, d, nullptr, 0, &n), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_session_detect_flush(s, d, found, 1, &n), MEGA_OK);
  EXPECT_EQ(mega_session_detect(s, d, audio.data(), 3999, nullptr, 0, &n), MEGA_OK);
  mega_session_reset(s);  // drops the pending samples
  mega_detector_reset(d);
  EXPECT_EQ(mega_session_detect_flush(s, d, nullptr, 0, &n), MEGA_OK);  // nothing pending, no hop seen

  mega_model* tiny = mega_model_load(mega_test::fixture_path("tiny_uni.mega").c_str(), &st);
  ASSERT_NE(tiny, nullptr);
  mega_session* other = mega_session_create(tiny, &st);
  EXPECT_EQ(mega_session_detect(other, d, audio.data(), 16000, found, 8, &n), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_session_detect_flush(other, d, found, 8, &n), MEGA_ERR_INVALID_ARGUMENT);
  mega_session_free(other);
  mega_model_free(tiny);

  // a bidirectional model's session cannot stream: the push's status comes back
  mega_model* bi = mega_model_load(mega_test::fixture_path("tiny_bi.mega").c_str(), &st);
  ASSERT_NE(bi, nullptr);
  mega_session* bs = mega_session_create(bi, &st);
  mega_detector* bd = mega_detector_create(bi, nullptr, &st);
  ASSERT_TRUE(bs && bd) << mega_load_error();
  EXPECT_EQ(mega_session_detect(bs, bd, audio.data(), 3, found, 8, &n), MEGA_ERR_NOT_STREAMABLE);
  mega_detector_free(bd);
  mega_session_free(bs);
  mega_model_free(bi);

  mega_detector_free(d);
  mega_session_free(s);
  mega_model_free(m);
}

// samples/commands.wav: the C API finds the words keyword_spotter scan finds,
// at the same times (the C++ detector's, which tests/apps/test_cli.sh checks
// against the CLI: the five spoken words of samples/commands.csv, in order,
// each within one hop of the word's end), through both of its paths, in any
// block size, at the defaults and with overrides; and again after a reset.
// The detector and the session keep what they need when the model is freed
// first.
namespace {

// samples/commands.csv: (label, the second at which the word ends) per spoken keyword.
std::vector<std::pair<std::string, double>> commands_csv() {
  std::ifstream f(std::string(MEGA_SAMPLES) + "/commands.csv");
  std::string line;
  std::getline(f, line);
  std::vector<std::string> head;
  for (size_t a = 0, b; a <= line.size(); a = b + 1) {
    b = line.find(',', a);
    if (b == std::string::npos) b = line.size();
    head.push_back(line.substr(a, b - a));
  }
  const size_t li = size_t(std::find(head.begin(), head.end(), "label") - head.begin());
  const size_t oi = size_t(std::find(head.begin(), head.end(), "offset_s") - head.begin());
  std::vector<std::pair<std::string, double>> out;
  while (std::getline(f, line)) {
    std::vector<std::string> cells;
    for (size_t a = 0, b; a <= line.size(); a = b + 1) {
      b = line.find(',', a);
      if (b == std::string::npos) b = line.size();
      cells.push_back(line.substr(a, b - a));
    }
    if (cells.size() > std::max(li, oi)) out.emplace_back(cells[li], std::stod(cells[oi]));
  }
  return out;
}

}  // namespace

TEST(CApiDetector, CommandsRecordingAsScanFindsIt) {
  int32_t rate = 0;
  const std::vector<float> audio = read_pcm16_wav(std::string(MEGA_SAMPLES) + "/commands.wav", &rate);
  ASSERT_EQ(rate, 16000);
  ASSERT_GT(audio.size(), 190000u);
  std::string err;
  auto cm = mega::Model::load(demo_model(), &err);
  ASSERT_TRUE(cm) << err;

  // At the model's defaults (strict: tuned for few false alarms) some of the
  // words; every one it reports is a spoken word, in order, at its time. At
  // --sensitivity 0.8 (below) all five.
  const std::vector<Found> want = scan_cpp(cm, audio, {});
  ASSERT_GE(want.size(), 1u);
  const std::vector<std::pair<std::string, double>> words = commands_csv();
  ASSERT_EQ(words.size(), 5u);
  const double hop = double(cm->hparams().chunk_samples()) / cm->hparams().sample_rate;
  auto expect_words = [&](const std::vector<Found>& found) {
    size_t w = 0;
    for (const Found& f : found) {
      while (w < words.size() && std::fabs(f.time_s - words[w].second) > hop + 1e-6) ++w;
      ASSERT_LT(w, words.size()) << f << " is not at a spoken word's end";
      EXPECT_EQ(cm->labels()[size_t(f.label)], words[w].first);
      ++w;
    }
  };
  expect_words(want);

  mega_status st = MEGA_ERR_IO;
  mega_model* m = mega_model_load(demo_model().c_str(), &st);
  ASSERT_NE(m, nullptr) << mega_load_error();
  mega_session* s = mega_session_create(m, &st);
  mega_detector* d = mega_detector_create(m, nullptr, &st);
  ASSERT_TRUE(s && d) << mega_load_error();
  // Under an emulator one block size that splits chunks and one sample at a time; the others, the
  // whole file in one push among them, are left to the native build (each is a pass over the whole
  // file: 25-50 s there).
  std::vector<int64_t> blocks = {1600, 1, 3999, 4000, 4001, 65536, int64_t(audio.size())};
  if (mega_test::kEmulated) blocks = {1, 4001};
  for (int64_t block : blocks) {
    mega_session_reset(s);
    mega_detector_reset(d);
    if (block == 1) {  // one sample at a time is slow through the whole file: up to the first detection
      const size_t head_n = std::min(audio.size(), size_t((want.front().time_s + 1.5) * rate));
      const std::vector<float> head(audio.begin(), audio.begin() + std::ptrdiff_t(head_n));
      const std::vector<Found> want_head = scan_cpp(cm, head, {});
      ASSERT_GE(want_head.size(), 1u);
      EXPECT_EQ(scan_c(s, d, head, block, m), want_head);
      continue;
    }
    EXPECT_EQ(scan_c(s, d, audio, block, m), want) << "blocks of " << block;
  }
  mega_session_reset(s);
  mega_detector_reset(d);
  EXPECT_EQ(scan_c_update(s, d, audio, m), want);

  // --sensitivity 0.8 --smoothing 3 --refractory-ms 500, and a recording that
  // ends in the middle of a chunk (10.3 s: the flush completes it)
  mega::DetectorOverrides ov;
  ov.sensitivity = 0.8f;
  ov.smoothing_hops = 3;
  ov.refractory_ms = 500;
  mega_detector_options o;
  mega_detector_options_init(&o);
  o.sensitivity = 0.8f;
  o.smoothing_hops = 3;
  o.refractory_ms = 500;
  mega_model* m2 = mega_model_load(demo_model().c_str(), &st);
  ASSERT_NE(m2, nullptr) << mega_load_error();
  mega_detector* d2 = mega_detector_create(m2, &o, &st);
  ASSERT_NE(d2, nullptr) << mega_load_error();
  mega_model_free(m2);  // the detector keeps what it needs (labels included)
  const std::vector<float> cut(audio.begin(), audio.begin() + 164800);
  for (const std::vector<float>* a : {&audio, &cut}) {
    const std::vector<Found> want2 = scan_cpp(cm, *a, ov);
    EXPECT_GE(want2.size(), 4u);
    if (a == &audio) {  // the five spoken words, in order, each within one hop of its end
      EXPECT_EQ(want2.size(), 5u);
      expect_words(want2);
    }
    mega_session_reset(s);
    EXPECT_EQ(scan_c(s, d2, *a, 1600, m), want2);
    mega_session_reset(s);
    mega_detector_reset(d2);
    EXPECT_EQ(scan_c_update(s, d2, *a, m), want2);
    mega_detector_reset(d2);
  }
  mega_detector_free(d2);
  mega_detector_free(d);
  mega_session_free(s);
  mega_model_free(m);
}

// A random-weight model at a low threshold fires on most hops: every hop's
// detection comes back, and the capacity rule holds with one per chunk.
TEST(CApiDetector, ManyDetectionsOnATinyModel) {
  std::string err;
  auto cm = mega::Model::load(mega_test::fixture_path("tiny_uni.mega"), &err);
  ASSERT_TRUE(cm) << err;
  std::vector<float> audio(20000);
  for (size_t i = 0; i < audio.size(); ++i) audio[i] = float(std::sin(0.01 * double(i * i % 100003)));
  mega::DetectorOverrides ov;
  ov.threshold = 0.2f;
  ov.refractory_ms = 0;
  const std::vector<Found> want = scan_cpp(cm, audio, ov);
  mega_status st;
  mega_model* m = mega_model_load(mega_test::fixture_path("tiny_uni.mega").c_str(), &st);
  ASSERT_NE(m, nullptr);
  EXPECT_GT(want.size(), 100u);  // of 2000 hops
  mega_detector_options o;
  mega_detector_options_init(&o);
  o.threshold = 0.2f;
  o.refractory_ms = 0;
  mega_session* s = mega_session_create(m, &st);
  mega_detector* d = mega_detector_create(m, &o, &st);
  ASSERT_TRUE(s && d) << mega_load_error();
  for (int64_t block : {int64_t(7), int64_t(160), int64_t(999), int64_t(20000)}) {
    mega_session_reset(s);
    mega_detector_reset(d);
    EXPECT_EQ(scan_c(s, d, audio, block, m), want) << "blocks of " << block;
  }
  mega_detector_free(d);
  mega_session_free(s);
  mega_model_free(m);
}

// A word that ends the recording: samples/commands.wav cut 50 ms after "left"
// ends (7.90 s). Smoothed over 3 hops, "left" has filled only the last hop or
// two when the audio stops; the flush's finish() hears it, hop-by-hop updates
// without it do not.
TEST(CApiDetector, FlushHearsTheWordThatEndsTheRecording) {
  int32_t rate = 0;
  std::vector<float> audio = read_pcm16_wav(std::string(MEGA_SAMPLES) + "/commands.wav", &rate);
  ASSERT_EQ(rate, 16000);
  audio.resize(size_t(7.95 * rate));
  mega_status st = MEGA_ERR_IO;
  mega_model* m = mega_model_load(demo_model().c_str(), &st);
  ASSERT_NE(m, nullptr) << mega_load_error();
  mega_detector_options o;
  mega_detector_options_init(&o);
  o.threshold = 0.965f;  // the demo model's defaults when this test was written, fixed here
  o.smoothing_hops = 3;
  o.refractory_ms = 1000;
  mega_detector* d = mega_detector_create(m, &o, &st);
  mega_session* s = mega_session_create(m, &st);
  ASSERT_TRUE(d && s);
  auto labels_of = [&](const std::vector<Found>& found) {
    std::vector<std::string> out;
    for (const Found& f : found) out.push_back(mega_model_label(m, f.label));
    return out;
  };
  const std::vector<std::string> by_update = labels_of(scan_c_update(s, d, audio, m));
  ASSERT_FALSE(by_update.empty());
  EXPECT_NE(by_update.back(), "left");  // "left" has not filled the window: the earlier words only
  mega_session_reset(s);
  mega_detector_reset(d);
  const std::vector<Found> by_flush = scan_c(s, d, audio, 4000, m);
  std::vector<std::string> want = by_update;
  want.push_back("left");
  ASSERT_EQ(labels_of(by_flush), want);  // the same words, then "left"
  EXPECT_NEAR(by_flush.back().time_s, 7.90, 0.25 + 1e-6);  // within one hop of the word's end
  mega_session_free(s);
  mega_detector_free(d);
  mega_model_free(m);
}

// Issue 81 item 1: the end of a stream has one answer, the core's keyword
// stream. A word in audio that ends inside a chunk: the flush completes the
// chunk with silence, and through the C API too the detection is timed no
// later than the end of the audio (it was 0.250 s, the end of the padded
// chunk, for 0.156 s of "yes"; the CLI's pipeline already said 0.156 s).
TEST(CApiDetector, AFlushDetectionIsTimedNoLaterThanTheAudio) {
  int32_t rate = 0;
  const std::vector<float> yes = read_pcm16_wav(std::string(MEGA_SAMPLES) + "/yes.wav", &rate);
  ASSERT_EQ(rate, 16000);
  ASSERT_GE(yes.size(), size_t(3200 + 2496));
  const std::vector<float> x(yes.begin() + 3200, yes.begin() + 3200 + 2496);  // 0.2 s in, 0.156 s long
  mega_status st = MEGA_ERR_IO;
  mega_model* m = mega_model_load(demo_model().c_str(), &st);
  ASSERT_NE(m, nullptr) << mega_load_error();
  ASSERT_NE(int64_t(x.size()) % mega_model_chunk_samples(m), 0);
  mega_detector_options o;
  mega_detector_options_init(&o);
  o.sensitivity = 0.8f;  // as the pipeline's test (apps/audio/test_stream_pipeline.cpp)
  mega_detector* d = mega_detector_create(m, &o, &st);
  mega_session* s = mega_session_create(m, &st);
  ASSERT_TRUE(d && s) << mega_load_error();
  const std::vector<Found> found = scan_c(s, d, x, 1000, m);
  ASSERT_FALSE(found.empty());
  for (const Found& f : found) EXPECT_LE(f.time_s, double(x.size()) / rate) << f.label;
  mega_session_free(s);
  mega_detector_free(d);
  mega_model_free(m);
}

// Issue 85 item 2, through the C API with the demo model's defaults: a
// keyword's logits in the first hop alone (what a tone or the first syllable
// of a sentence gives while the model's window fills) fire nothing; a keyword
// whose logits stay up from the first hop fires, dated from its first hop.
TEST(CApiDetector, TheFirstHopsOfAStreamDoNotFireAlone) {
  mega_status st = MEGA_ERR_IO;
  mega_model* m = mega_model_load(demo_model().c_str(), &st);
  ASSERT_NE(m, nullptr) << mega_load_error();
  mega_detector* d = mega_detector_create(m, nullptr, &st);
  ASSERT_NE(d, nullptr) << mega_load_error();
  const int32_t n = mega_model_n_classes(m);
  auto index_of = [&](const char* label) {
    int32_t i = 0;
    while (i < n && std::strcmp(mega_model_label(m, i), label) != 0) ++i;
    return i;
  };
  const int32_t go = index_of("go"), unknown = index_of("_unknown_");
  ASSERT_LT(go, n);
  ASSERT_LT(unknown, n);
  auto peaked = [&](int32_t label) {  // softmax about 0.999 on label
    std::vector<float> l(size_t(n), 0.0f);
    l[size_t(label)] = 10.0f;
    return l;
  };
  auto fired_at = [&](const std::vector<std::vector<float>>& hops) {
    std::vector<int64_t> out;
    for (const auto& l : hops) {
      mega_detection x;
      int32_t fired = 0;
      EXPECT_EQ(mega_detector_update(d, l.data(), &x, &fired), MEGA_OK);
      if (fired) {
        EXPECT_EQ(x.label_index, go);
        out.push_back(x.hop_index);
      }
    }
    return out;
  };
  std::vector<std::vector<float>> spike(20, peaked(unknown));
  spike[0] = peaked(go);
  EXPECT_TRUE(fired_at(spike).empty());
  mega_detector_reset(d);
  std::vector<std::vector<float>> word(20, peaked(unknown));
  for (size_t i = 0; i < 6; ++i) word[i] = peaked(go);
  const std::vector<int64_t> got = fired_at(word);
  ASSERT_EQ(got.size(), 1u);
  std::string err;
  auto cm = mega::Model::load(demo_model(), &err);
  ASSERT_TRUE(cm) << err;
  EXPECT_EQ(got[0], cm->hparams().window_chunks);  // the first hop after the model's window has filled
  mega_detector_free(d);
  mega_model_free(m);
}

// Issue 85 item 7: a NaN or an infinity among the logits is refused, and the
// detector is as it was: the same stream with such hops in between gives the
// same detections at the same hops.
TEST(CApiDetector, NonFiniteLogitsAreRefusedAndChangeNothing) {
  mega_status st = MEGA_ERR_IO;
  mega_model* m = mega_model_load(demo_model().c_str(), &st);
  ASSERT_NE(m, nullptr) << mega_load_error();
  mega_detector_options o;
  mega_detector_options_init(&o);
  o.threshold = 0.5f;
  o.refractory_ms = 0;
  mega_detector* d = mega_detector_create(m, &o, &st);
  ASSERT_NE(d, nullptr) << mega_load_error();
  const int32_t n = mega_model_n_classes(m);
  std::vector<std::vector<float>> hops;
  for (int32_t h = 0; h < 40; ++h) {  // each keyword in turn, four hops each
    std::vector<float> l(size_t(n), 0.0f);
    l[size_t((h / 4) % n)] = 8.0f;
    hops.push_back(l);
  }
  auto feed = [&](bool with_bad) {
    std::vector<std::pair<int64_t, int32_t>> out;
    mega_detector_reset(d);
    for (size_t h = 0; h < hops.size(); ++h) {
      mega_detection x;
      int32_t fired = -1;
      if (with_bad) {
        for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
          std::vector<float> l = hops[h];
          l[h % size_t(n)] = bad;
          EXPECT_EQ(mega_detector_update(d, l.data(), &x, &fired), MEGA_ERR_INVALID_ARGUMENT) << "hop " << h;
          EXPECT_EQ(fired, 0);
        }
      }
      EXPECT_EQ(mega_detector_update(d, hops[h].data(), &x, &fired), MEGA_OK);
      if (fired) out.emplace_back(x.hop_index, x.label_index);
    }
    return out;
  };
  const auto want = feed(false);
  EXPECT_GE(want.size(), 5u);
  EXPECT_EQ(feed(true), want);
  mega_detector_free(d);
  mega_model_free(m);
}
