// SPDX-License-Identifier: Apache-2.0
// The engines (mega/engine.hpp) on the CPU: an Engine gives the same results
// for any push blocking and through submit()/poll(); the BatchEngine's
// streams equal single engines; the factory's answers for unknown or
// unavailable backends and bad options; the CPU backend found through the
// registry like any other; the input scaling every backend applies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "backend.h"
#include "golden.h"
#include "mega/engine.hpp"
#include "ops.h"

using mega_test::Golden;

namespace {

std::unique_ptr<mega::Engine> cpu_engine(const std::shared_ptr<const mega::Model>& m, int32_t in_flight = 3) {
  mega::EngineOptions o;
  o.max_in_flight = in_flight;
  std::string err;
  auto e = mega::create_engine("cpu", m, o, &err);
  EXPECT_TRUE(e) << err;
  return e;
}

// Every chunk's logits of `in` pushed in one call through engine e.
std::vector<float> chunk_logits(mega::Engine& e, const std::vector<float>& in) {
  std::vector<float> out;
  const int32_t nc = e.model().hparams().n_classes;
  EXPECT_EQ(e.push_all(in.data(), int64_t(in.size()),
                       [&](const mega::ChunkResult& r) { out.insert(out.end(), r.logits, r.logits + nc); }),
            mega::Status::ok);
  return out;
}

// The same through a fresh CPU engine.
std::vector<float> pushed_at_once(const std::shared_ptr<const mega::Model>& m, const std::vector<float>& in) {
  auto s = cpu_engine(m);
  EXPECT_TRUE(s);
  return s ? chunk_logits(*s, in) : std::vector<float>();
}

}  // namespace

TEST(CpuEngine, PushInBlocksAndClipGiveTheReferenceResults) {
  Golden g;
  auto m = mega_test::load_fixture(MEGA_FIXTURES, "tiny_patch", &g);
  ASSERT_TRUE(m);
  const auto& in = g.at("input");
  const int32_t nc = m->hparams().n_classes;
  auto e = cpu_engine(m);
  ASSERT_TRUE(e);
  EXPECT_STREQ(e->backend(), "cpu");
  std::vector<float> got;
  for (size_t off = 0; off < in.size(); off += 7) {
    const int64_t n = std::min<int64_t>(7, int64_t(in.size() - off));
    ASSERT_EQ(e->push_all(in.data() + off, n,
                          [&](const mega::ChunkResult& r) { got.insert(got.end(), r.logits, r.logits + nc); }),
              mega::Status::ok);
  }
  EXPECT_EQ(got, pushed_at_once(m, in));
  std::vector<float> logits(static_cast<size_t>(nc));
  ASSERT_EQ(e->classify_clip(in.data(), int64_t(in.size()), logits.data()), mega::Status::ok);
  EXPECT_LE(mega_test::max_abs_diff(logits.data(), g.at("logits").data(), logits.size()), 2e-5);
  float diff = -1.0f;
  EXPECT_EQ(e->self_test(&diff), mega::Status::ok);
  EXPECT_GE(diff, 0.0f);
  EXPECT_GT(e->memory_bytes(), 0);
}

TEST(CpuEngine, SubmitQueuesUntilBusyAndPollCollectsInOrder) {
  Golden g;
  auto m = mega_test::load_fixture(MEGA_FIXTURES, "tiny_uni", &g);
  ASSERT_TRUE(m);
  const auto& in = g.at("input");
  const int32_t nc = m->hparams().n_classes;
  auto e = cpu_engine(m, 2);
  ASSERT_TRUE(e);
  mega::ChunkResult r;
  bool ready = true;
  ASSERT_EQ(e->poll(&r, &ready), mega::Status::ok);
  EXPECT_FALSE(ready);
  EXPECT_EQ(e->wait(&r), mega::Status::invalid_argument);
  std::vector<float> got;
  int64_t next_index = 0;
  int busy = 0;
  size_t off = 0;
  while (off < in.size()) {
    int64_t used = 0;
    bool sent = false;
    const mega::Status s = e->submit(in.data() + off, std::min<int64_t>(3, int64_t(in.size() - off)), &used, &sent);
    if (s == mega::Status::busy) {
      ++busy;
      EXPECT_EQ(used, 0);
      ASSERT_EQ(e->poll(&r, &ready), mega::Status::ok);
      ASSERT_TRUE(ready);
      EXPECT_EQ(r.chunk_index, next_index++);
      got.insert(got.end(), r.logits, r.logits + nc);
      continue;
    }
    ASSERT_EQ(s, mega::Status::ok);
    off += size_t(used);
  }
  while (e->wait(&r) == mega::Status::ok) {
    EXPECT_EQ(r.chunk_index, next_index++);
    got.insert(got.end(), r.logits, r.logits + nc);
  }
  EXPECT_GT(busy, 0);
  EXPECT_EQ(got, pushed_at_once(m, in));
}

TEST(CpuBatchEngine, StreamsEqualSingleEngines) {
  Golden g;
  auto m = mega_test::load_fixture(MEGA_FIXTURES, "tiny_patch", &g);
  ASSERT_TRUE(m);
  const auto& in = g.at("input");
  const int64_t cs = m->hparams().chunk_samples();
  const int32_t nc = m->hparams().n_classes, B = 3;
  const int64_t n_chunks = int64_t(in.size()) / cs;
  mega::EngineOptions o;
  o.max_in_flight = 2;
  std::string err;
  auto batch = mega::create_batch_engine("cpu", m, B, o, &err);
  ASSERT_TRUE(batch) << err;
  EXPECT_EQ(batch->n_streams(), B);
  std::vector<std::unique_ptr<mega::Engine>> single;
  for (int32_t b = 0; b < B; ++b) single.push_back(cpu_engine(m));
  std::vector<float> step(size_t(B * cs));
  for (int64_t c = 0; c < n_chunks; ++c) {
    if (c == 2) {
      ASSERT_EQ(batch->reset(1), mega::Status::ok);
      single[1]->reset();
    }
    for (int32_t b = 0; b < B; ++b) {
      for (int64_t i = 0; i < cs; ++i) step[size_t(b * cs + i)] = in[size_t((c * cs + i + b * 11) % int64_t(in.size()))];
    }
    ASSERT_EQ(batch->submit(step.data()), mega::Status::ok);
    mega::BatchResult r;
    ASSERT_EQ(batch->wait(&r), mega::Status::ok);
    EXPECT_EQ(r.step, c);
    for (int32_t b = 0; b < B; ++b) {
      int64_t used = 0;
      bool done = false;
      ASSERT_EQ(single[size_t(b)]->push(step.data() + b * cs, cs, &used, &done), mega::Status::ok);
      ASSERT_TRUE(done);
      EXPECT_EQ(r.chunk_index[b], single[size_t(b)]->last_result().chunk_index);
      EXPECT_TRUE(std::equal(r.logits + b * nc, r.logits + (b + 1) * nc, single[size_t(b)]->last_result().logits))
          << "stream " << b << " chunk " << c;
    }
  }
  // two uncollected steps fill the queue
  ASSERT_EQ(batch->submit(step.data()), mega::Status::ok);
  ASSERT_EQ(batch->submit(step.data()), mega::Status::ok);
  EXPECT_EQ(batch->submit(step.data()), mega::Status::busy);
  EXPECT_EQ(batch->reset(B), mega::Status::invalid_argument);
  EXPECT_EQ(batch->reset(-1), mega::Status::ok);
}

TEST(EngineFactory, UnknownUnavailableAndBadOptions) {
  auto m = mega_test::load_model(mega_test::fixture_path("tiny_uni.mega"));
  auto bi = mega_test::load_model(mega_test::fixture_path("tiny_bi.mega"));
  ASSERT_TRUE(m && bi);
  std::string err, why;
  mega::Status st = mega::Status::ok;
  EXPECT_FALSE(mega::create_engine("tpu", m, mega::EngineOptions(), &err, &st));
  EXPECT_EQ(st, mega::Status::invalid_argument);
  EXPECT_NE(err.find("unknown backend"), std::string::npos) << err;
  EXPECT_TRUE(mega::backend_available("cpu"));
  EXPECT_FALSE(mega::backend_available("tpu", &why));
  const bool cuda = mega::backend_available("cuda", &why);
  EXPECT_FALSE(why.empty());
  EXPECT_STREQ(mega::default_backend(), cuda ? "cuda" : "cpu");
  if (!cuda) {
    EXPECT_FALSE(mega::create_engine("cuda", m, mega::EngineOptions(), &err, &st));
    EXPECT_EQ(st, mega::Status::no_device);
    EXPECT_FALSE(err.empty());
    EXPECT_FALSE(mega::create_batch_engine("cuda", m, 4, mega::EngineOptions(), &err, &st));
    EXPECT_EQ(st, mega::Status::no_device);
  }
  mega::EngineOptions bad;
  bad.max_in_flight = 0;
  EXPECT_FALSE(mega::create_engine("cpu", m, bad, &err, &st));
  EXPECT_EQ(st, mega::Status::invalid_argument);
  EXPECT_FALSE(mega::create_batch_engine("cpu", bi, 2, mega::EngineOptions(), &err, &st));
  EXPECT_EQ(st, mega::Status::not_streamable);
  EXPECT_FALSE(mega::create_batch_engine("cpu", m, 0, mega::EngineOptions(), &err, &st));
  EXPECT_EQ(st, mega::Status::invalid_argument);
  EXPECT_STREQ(mega::status_name(mega::Status::no_device), "no such compute device");
}

// A backend a program registers: it counts its engines and makes them with
// the CPU backend's table.
namespace {
int g_fake_engines = 0;
std::unique_ptr<mega::Engine> fake_create(std::shared_ptr<const mega::Model> model, const mega::EngineOptions& o,
                                          std::string* error, mega::Status* status) {
  ++g_fake_engines;
  return mega::cpu_backend_entry()->create_engine(std::move(model), o, error, status);
}
}  // namespace

TEST(EngineFactory, TheCpuBackendIsRegisteredLikeAnyOther) {
  const mega::BackendInterface* cpu = mega::cpu_backend_entry();
  ASSERT_NE(cpu, nullptr);
  EXPECT_STREQ(cpu->name, "cpu");
  EXPECT_STREQ(cpu->abi, MEGA_KWS_VERSION_STRING);
  // its name is taken before any program can register one
  EXPECT_FALSE(mega::register_backend(cpu));
  mega::BackendInterface impostor = *cpu;
  EXPECT_FALSE(mega::register_backend(&impostor));
  // a registered backend is reached by its name, through the same factory
  static mega::BackendInterface fake = *cpu;
  fake.name = "fake-cpu";
  fake.create_engine = fake_create;
  ASSERT_TRUE(mega::register_backend(&fake));
  EXPECT_TRUE(mega::backend_available("fake-cpu"));
  auto m = mega_test::load_model(mega_test::fixture_path("tiny_uni.mega"));
  ASSERT_TRUE(m);
  std::string err;
  auto e = mega::create_engine("fake-cpu", m, mega::EngineOptions(), &err);
  ASSERT_TRUE(e) << err;
  EXPECT_EQ(g_fake_engines, 1);
  EXPECT_STREQ(e->backend(), "cpu");
  auto c = mega::create_engine("cpu", m, mega::EngineOptions(), &err);
  ASSERT_TRUE(c) << err;
  EXPECT_EQ(g_fake_engines, 1);
}

// Issue 81 item 2: the reference backend, the scalar reference kernels as a
// backend of their own (no stream code: the core's stream over the CPU ops),
// reached by name like the others. Its streams, batches and clips give what
// the CPU backend gives with the reference kernels chosen, bit for bit.
TEST(EngineFactory, TheReferenceBackendIsTheScalarKernels) {
  Golden g;
  auto m = mega_test::load_fixture(MEGA_FIXTURES, "tiny_patch", &g);
  ASSERT_TRUE(m);
  const auto& in = g.at("input");
  const int32_t nc = m->hparams().n_classes;
  std::string why;
  EXPECT_TRUE(mega::backend_available("reference", &why)) << why;
  mega::EngineOptions cpu_ref;
  cpu_ref.kernels = mega::KernelImpl::reference;
  std::string err;
  auto ref = mega::create_engine("reference", m, mega::EngineOptions(), &err);
  ASSERT_TRUE(ref) << err;
  EXPECT_STREQ(ref->backend(), "reference");
  auto cpu = mega::create_engine("cpu", m, cpu_ref, &err);
  ASSERT_TRUE(cpu) << err;
  const std::vector<float> want = chunk_logits(*cpu, in);
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(chunk_logits(*ref, in), want);
  std::vector<float> a(static_cast<size_t>(nc)), b(static_cast<size_t>(nc));
  ASSERT_EQ(ref->classify_clip(in.data(), int64_t(in.size()), a.data()), mega::Status::ok);
  ASSERT_EQ(cpu->classify_clip(in.data(), int64_t(in.size()), b.data()), mega::Status::ok);
  EXPECT_EQ(a, b);
  // a batch of two streams: each one's chunks are the single stream's
  auto batch = mega::create_batch_engine("reference", m, 2, mega::EngineOptions(), &err);
  ASSERT_TRUE(batch) << err;
  EXPECT_STREQ(batch->backend(), "reference");
  const int64_t cs = m->hparams().chunk_samples();
  std::vector<float> two(size_t(2 * cs)), got;
  for (int64_t c = 0; (c + 1) * cs <= int64_t(in.size()); ++c) {
    std::copy(in.begin() + c * cs, in.begin() + (c + 1) * cs, two.begin());
    std::copy(in.begin() + c * cs, in.begin() + (c + 1) * cs, two.begin() + cs);
    ASSERT_EQ(batch->submit(two.data()), mega::Status::ok);
    mega::BatchResult r;
    ASSERT_EQ(batch->wait(&r), mega::Status::ok);
    EXPECT_TRUE(std::equal(r.logits, r.logits + nc, r.logits + nc));
    got.insert(got.end(), r.logits, r.logits + nc);
  }
  EXPECT_EQ(got, want);
}

// The one input-scaling rule (ops.h) that the CPU engine and the CUDA
// backend's stager both call: off, the sample as it is; on, (s - mean) /
// (std + 1e-5), also for a zero std.
TEST(InputScaling, OneRuleForEveryBackend) {
  mega::ModelInfo info;
  info.input_mean = 0.25f;
  info.input_std = 0.5f;
  const float samples[] = {-1.0f, -0.3f, 0.0f, 0.25f, 0.7f, 1.0f};
  for (float s : samples) EXPECT_EQ(mega::scale_input(info, s), s);
  info.input_scaling = true;
  for (float s : samples) {
    const float want = (s - 0.25f) / (0.5f + 1e-5f);
    EXPECT_EQ(mega::scale_input(info, s), want) << s;
  }
  EXPECT_EQ(mega::scale_input(info, 0.25f), 0.0f);
  info.input_std = 0.0f;
  EXPECT_FLOAT_EQ(mega::scale_input(info, 1.25f), 1.0f / 1e-5f);
}
