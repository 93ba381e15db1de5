// SPDX-License-Identifier: Apache-2.0
// Zero heap allocations per chunk after warm-up: the streaming path (one and
// two threads, the paper's base model and the tiny ones), classify_clip and
// reset, the detector (C++ and the C API's mega_session_detect), counted by
// replacing the process's allocator (alloc_counter.cpp).
// The self-checks prove the counter sees what a kernel could do wrong: a
// malloc, a new, a growing vector, on this thread or another one.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "alloc_counter.h"
#include "golden.h"
#include "mega/detector.hpp"
#include "mega/engine.hpp"
#include "mega/mega.hpp"
#include "mega/mega_kws.h"

using mega_alloc::allocations_in;

namespace {

TEST(AllocCounter, SeesDeliberateAllocations) {
  // volatile pointers keep the compiler from eliding the allocations
  EXPECT_GE(allocations_in([] {
              void* volatile p = std::malloc(24);
              std::free(p);
            }),
            1);
  EXPECT_GE(allocations_in([] {
              int* volatile p = new int(3);
              delete p;
            }),
            1);
  EXPECT_GE(allocations_in([] {
              std::vector<float> v;
              for (int i = 0; i < 100; ++i) v.push_back(float(i));
              volatile float sink = v.back();
              (void)sink;
            }),
            1);
  // on another thread (started before counting, as the session's workers are)
  std::atomic<int> go{0};
  std::thread t([&] {
    while (go.load() == 0) std::this_thread::yield();
    void* volatile p = std::malloc(100);
    std::free(p);
    go.store(2);
  });
  EXPECT_GE(allocations_in([&] {
              go.store(1);
              while (go.load() != 2) std::this_thread::yield();
            }),
            1);
  t.join();
  EXPECT_EQ(allocations_in([] {}), 0);
}

// Threads other libraries start at load time (OpenBLAS's pool) may still be
// setting themselves up, which allocates (under AddressSanitizer, visibly so):
// wait until 50 ms pass without an allocation before counting anything.
void wait_for_quiet_allocator() {
  for (int i = 0; i < 100; ++i) {
    if (allocations_in([] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }) == 0) return;
  }
  ADD_FAILURE() << "allocations never stopped";
}

std::shared_ptr<const mega::Model> load(const std::string& path) {
  std::string err;
  auto m = mega::Model::load(path, &err);
  EXPECT_TRUE(m) << path << ": " << err;
  return m;
}

// Streams n_chunks + 1 chunks in awkward blocks (1, 7, 160, 999 samples) after
// one warm-up chunk, then (with_clip) classifies a window, resets and streams
// one more chunk; returns the allocations counted after the warm-up.
int64_t allocations_after_warmup(const std::shared_ptr<const mega::Model>& m, int32_t n_threads, int64_t n_chunks,
                                 bool with_clip) {
  mega::EngineOptions o;
  o.n_threads = n_threads;
  std::string err;
  auto s = mega::create_engine("cpu", m, o, &err);
  EXPECT_TRUE(s) << err;
  if (!s) return -1;
  const mega::HParams& hp = m->hparams();
  const int64_t n = hp.chunk_samples() * (n_chunks + 1);  // streamed
  std::vector<float> audio(static_cast<size_t>(std::max(n, hp.window_samples())));  // also a window to classify
  for (size_t i = 0; i < audio.size(); ++i) audio[i] = float((i * 7919) % 2000) / 1000.0f - 1.0f;
  std::vector<float> logits(size_t(hp.n_classes));
  int64_t chunks = 0;
  auto on_chunk = [&](const mega::ChunkResult& r) {
    ++chunks;
    logits[0] = r.logits[0];
  };
  EXPECT_EQ(s->push_all(audio.data(), hp.chunk_samples(), on_chunk), mega::Status::ok);  // warm-up
  if (with_clip) {
    EXPECT_EQ(s->classify_clip(audio.data(), hp.window_samples(), logits.data()), mega::Status::ok);
  }
  wait_for_quiet_allocator();
  const int64_t blocks[] = {1, 7, 160, 999};
  const int64_t counted = allocations_in([&] {
    int64_t off = 0;
    for (size_t b = 0; off < n; b = (b + 1) % 4) {
      const int64_t len = std::min(blocks[b], n - off);
      s->push_all(audio.data() + off, len, on_chunk);
      off += len;
    }
    if (with_clip) s->classify_clip(audio.data(), hp.window_samples(), logits.data());
    s->reset();
    s->push_all(audio.data(), hp.chunk_samples(), on_chunk);
  });
  EXPECT_EQ(chunks, 1 + (n_chunks + 1) + 1);
  return counted;
}

TEST(Allocations, NonePerChunkOnTheBaseModel) {
  auto m = load(std::string(MEGA_SOURCE_DIR) + "/models/sc10-random-init.mega");
  ASSERT_TRUE(m);
  mega::set_blas_threads(1);
  for (int32_t threads : {1, 2}) {
    // 16 chunks a window: the clip path (the same per-chunk code) only on the tiny models
    EXPECT_EQ(allocations_after_warmup(m, threads, 2, false), 0) << threads << " thread(s)";
  }
}

TEST(Allocations, NonePerChunkOnTinyModels) {
  // softmax (the sgemm path), relu2, a patch embedding, layer norm
  for (const char* name : {"tiny_uni", "tiny_softmax_ln_post", "tiny_relu2_scale_noffn", "tiny_patch", "tiny_logpower",
                           "tiny_lognorm", "tiny_logmel"}) {
    auto m = load(mega_test::fixture_path(std::string(name) + ".mega"));
    ASSERT_TRUE(m);
    for (int32_t threads : {1, 2}) {
      EXPECT_EQ(allocations_after_warmup(m, threads, 5, true), 0) << name << ", " << threads << " thread(s)";
    }
  }
}

// The teacher's front end: each chunk pushes its samples through the mel
// frames and the embedding graph's rows, in buffers made at creation.
TEST(Allocations, NonePerChunkWithTheTeacherFrontEnd) {
  auto m = load(std::string(MEGA_GENERATED) + "/teacher_tiny.mega");
  ASSERT_TRUE(m);
  mega::set_blas_threads(1);  // the mel frames' dgemm, as keyword_spotter runs it
  EXPECT_EQ(allocations_after_warmup(m, 1, 5, true), 0);
}

// The detector after creation: update() on a stream that fires (a low
// threshold and no refractory time on a random-weight model), and reset().
TEST(Allocations, NoneInTheDetector) {
  auto m = load(mega_test::fixture_path("tiny_uni.mega"));
  ASSERT_TRUE(m);
  mega::DetectorOverrides o;
  o.threshold = 0.2f;
  o.refractory_ms = 0;
  o.smoothing_hops = 3;
  std::string err;
  auto det = mega::Detector::for_model(*m, o, &err);
  auto s = mega::create_engine("cpu", m, mega::EngineOptions(), &err);
  ASSERT_TRUE(det && s) << err;
  std::vector<float> audio(size_t(m->hparams().chunk_samples() * 200));
  for (size_t i = 0; i < audio.size(); ++i) audio[i] = float((i * 7919) % 2000) / 1000.0f - 1.0f;
  std::vector<float> logits;  // every chunk's window logits, gathered before counting
  s->push_all(audio.data(), int64_t(audio.size()), [&](const mega::ChunkResult& r) {
    logits.insert(logits.end(), r.logits, r.logits + m->hparams().n_classes);
  });
  wait_for_quiet_allocator();
  int fired = 0;
  const int64_t counted = allocations_in([&] {
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t off = 0; off < logits.size(); off += size_t(m->hparams().n_classes)) {
        mega::Detection d;
        fired += det->update(logits.data() + off, &d) ? 1 : 0;
      }
      det->reset();
    }
  });
  EXPECT_EQ(counted, 0);
  EXPECT_GT(fired, 20);
}

// The C API: mega_session_detect in awkward blocks, mega_session_detect_flush,
// mega_detector_update and the resets, after creation (the demo model, and a
// tiny model that fires often at threshold 0.2).
TEST(Allocations, NoneInTheCApiDetection) {
  for (const std::string& path : {std::string(MEGA_SOURCE_DIR) + "/models/sc10-demo.mega",
                                  mega_test::fixture_path("tiny_uni.mega")}) {
    mega_status st;
    mega_model* m = mega_model_load(path.c_str(), &st);
    ASSERT_NE(m, nullptr) << mega_load_error();
    mega_detector_options o;
    mega_detector_options_init(&o);
    o.threshold = 0.2f;
    o.refractory_ms = 0;
    mega_session* s = mega_session_create(m, &st);
    mega_detector* d = mega_detector_create(m, &o, &st);
    ASSERT_TRUE(s && d) << mega_load_error();
    const int64_t chunk = mega_model_chunk_samples(m);
    std::vector<float> audio(size_t(chunk * 20 + 123));
    for (size_t i = 0; i < audio.size(); ++i) audio[i] = float((i * 7919) % 2000) / 1000.0f - 1.0f;
    std::vector<mega_detection> out(audio.size() / size_t(chunk) + 1);
    std::vector<float> logits(size_t(mega_model_n_classes(m)));
    int32_t n = 0, fired = 0, total = 0;
    int64_t used = 0;
    int32_t done = 0;
    // warm-up: one chunk
    EXPECT_EQ(mega_session_detect(s, d, audio.data(), chunk, out.data(), int32_t(out.size()), &n), MEGA_OK);
    wait_for_quiet_allocator();
    const int64_t blocks[] = {1, 7, 160, 999, chunk + 1};
    const int64_t counted = allocations_in([&] {
      int64_t off = 0;
      for (size_t b = 0; off < int64_t(audio.size()); b = (b + 1) % 5) {
        const int64_t len = std::min(blocks[b], int64_t(audio.size()) - off);
        mega_session_detect(s, d, audio.data() + off, len, out.data(), int32_t(out.size()), &n);
        total += n;
        off += len;
      }
      mega_session_detect_flush(s, d, out.data(), int32_t(out.size()), &n);
      total += n;
      mega_session_reset(s);
      mega_detector_reset(d);
      for (int64_t k = 0; k < chunk;) {
        mega_session_push(s, audio.data() + k, chunk - k, &used, &done, logits.data());
        k += used;
        if (done) mega_detector_update(d, logits.data(), out.data(), &fired);
      }
    });
    EXPECT_EQ(counted, 0) << path;
    if (path.find("tiny") != std::string::npos) {
      EXPECT_GT(total, 0) << "the tiny model never fired";
    }
    mega_detector_free(d);
    mega_session_free(s);
    mega_model_free(m);
  }
}

}  // namespace
