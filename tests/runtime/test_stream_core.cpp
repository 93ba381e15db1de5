// SPDX-License-Identifier: Apache-2.0
// The core's stream (runtime/src/core/stream.cpp) over an asynchronous step,
// as the CUDA backend's is, without a GPU: DeferredStep wraps the host step
// of the CPU ops and reports a launched slot done only after some ready()
// queries or a finish(). So the core's slots in flight, its busy answer, its
// collection order, its clips that wait for a free slot and its recovery
// from non-finite logits at collection are tested in every build, on the
// same code the CUDA backend runs under.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_ops.h"
#include "golden.h"
#include "overflow_model.h"
#include "stream.h"
#include "test_stream.h"

namespace {

class DeferredStep final : public mega::StepOps {
 public:
  DeferredStep(std::unique_ptr<mega::StepOps> inner, int32_t polls) : inner_(std::move(inner)), polls_(polls) {
    left_.assign(size_t(inner_->n_slots()), 0);
  }
  int32_t n_slots() const override { return inner_->n_slots(); }
  mega::StepSlot slot(int32_t r) override { return inner_->slot(r); }
  mega::Status launch(int32_t r) override {
    ++launches;
    left_[size_t(r)] = polls_;
    return inner_->launch(r);
  }
  mega::Status ready(int32_t r, bool* done) override {
    if (left_[size_t(r)] > 0) --left_[size_t(r)];
    *done = left_[size_t(r)] == 0;
    return mega::Status::ok;
  }
  mega::Status finish(int32_t r) override {
    left_[size_t(r)] = 0;
    return mega::Status::ok;
  }
  mega::Status clear_state(int32_t b) override {
    ++clears;
    return inner_->clear_state(b);
  }
  mega::Status clip_head(int32_t r, float* logits) override {
    EXPECT_EQ(left_[size_t(r)], 0) << "the clip's head before its last step was done";
    return inner_->clip_head(r, logits);
  }
  float* clip_samples() override { return inner_->clip_samples(); }
  int64_t clip_tokens() const override { return inner_->clip_tokens(); }
  mega::Status classify_span(int64_t n_tok, float* logits) override { return inner_->classify_span(n_tok, logits); }
  int64_t memory_bytes() const override { return inner_->memory_bytes(); }

  int launches = 0, clears = 0;

 private:
  std::unique_ptr<mega::StepOps> inner_;
  int32_t polls_;
  std::vector<int32_t> left_;
};

std::unique_ptr<DeferredStep> deferred(const std::shared_ptr<const mega::Model>& m, int32_t n_streams,
                                       int32_t n_slots, int32_t polls) {
  const mega::HParams hp = m->hparams();
  const mega::ModelWeights& w = mega::model_weights(*m);
  auto inner = mega::create_host_step(*m, n_streams, n_slots, hp.chunk_size, [&](int64_t tokens) {
    return mega::create_cpu_stream_ops(hp, w, mega::KernelImpl::optimized, 1, tokens);
  }, 0);
  EXPECT_TRUE(inner);
  return std::make_unique<DeferredStep>(std::move(inner), polls);
}

std::unique_ptr<mega::Engine> stream_on(const std::shared_ptr<const mega::Model>& m, std::unique_ptr<DeferredStep> s) {
  std::string err;
  auto e = mega::create_stream("deferred", m, std::move(s), &err, nullptr);
  EXPECT_TRUE(e) << err;
  return e;
}

TEST(CoreStream, SubmitAndPollOverAnAsynchronousStepGiveThePushResults) {
  mega_test::Golden g;
  auto m = mega_test::load_fixture(MEGA_FIXTURES, "tiny_patch", &g);
  ASSERT_TRUE(m);
  const auto& in = g.at("input");
  const int32_t nc = m->hparams().n_classes;
  auto cpu = mega_test::cpu_engine(m);
  ASSERT_TRUE(cpu);
  const auto want = mega_test::window_logits(*cpu, in, 7);
  auto step = deferred(m, 1, 3, 4);
  DeferredStep* probe = step.get();
  auto e = stream_on(m, std::move(step));
  ASSERT_TRUE(e);
  // pushed: each chunk waits for its own step
  EXPECT_EQ(mega_test::window_logits(*e, in, 13), want);
  e->reset();
  std::vector<float> got;
  int64_t next = 0;
  int busy = 0, not_ready = 0;
  size_t off = 0;
  while (off < in.size()) {
    int64_t used = 0;
    bool sent = false;
    const mega::Status s = e->submit(in.data() + off, std::min<int64_t>(5, int64_t(in.size() - off)), &used, &sent);
    if (s == mega::Status::busy) {  // three steps in flight: nothing consumed until one is collected
      ++busy;
      EXPECT_EQ(used, 0);
      mega::ChunkResult r;
      bool ready = false;
      ASSERT_EQ(e->poll(&r, &ready), mega::Status::ok);
      if (!ready) {
        ++not_ready;
        continue;
      }
      EXPECT_EQ(r.chunk_index, next++);
      got.insert(got.end(), r.logits, r.logits + nc);
      continue;
    }
    ASSERT_EQ(s, mega::Status::ok);
    off += size_t(used);
  }
  mega::ChunkResult r;
  while (e->wait(&r) == mega::Status::ok) {
    EXPECT_EQ(r.chunk_index, next++);
    got.insert(got.end(), r.logits, r.logits + nc);
  }
  EXPECT_GT(busy, 0);
  EXPECT_GT(not_ready, 0) << "the deferred step never made poll() wait";
  EXPECT_EQ(got, want);
  EXPECT_GT(probe->launches, 0);
}

TEST(CoreStream, ClipsWaitForFreeSlots) {
  // a clip of more chunks than slots: the core waits for the oldest step
  mega_test::Golden g;
  auto m = mega_test::load_fixture(MEGA_FIXTURES, "tiny_uni", &g);
  ASSERT_TRUE(m);
  const auto& in = g.at("input");
  ASSERT_GT(m->hparams().padded_clip_samples(int64_t(in.size())) / m->hparams().chunk_samples(), 2);
  auto e = stream_on(m, deferred(m, 1, 2, 1000));
  ASSERT_TRUE(e);
  std::vector<float> got(size_t(m->hparams().n_classes)), want = got;
  ASSERT_EQ(e->classify_clip(in.data(), int64_t(in.size()), got.data()), mega::Status::ok);
  auto cpu = mega_test::cpu_engine(m);
  ASSERT_TRUE(cpu);
  ASSERT_EQ(cpu->classify_clip(in.data(), int64_t(in.size()), want.data()), mega::Status::ok);
  EXPECT_EQ(got, want);
  EXPECT_LE(mega_test::max_abs_diff(got.data(), g.at("logits").data(), got.size()), 1e-4);
}

// Three streams of a model that overflows on loud input (overflow_model.h);
// stream 1 gets one loud chunk (chunk 1) in silence, the others a tone.
// Each stream's window logits, per chunk, from a batch over a step that is
// done after `polls` queries, and from three single CPU engines; the resets.
struct OverflowRun {
  std::vector<std::vector<float>> batch, single;
  int64_t batch_resets = 0, single_resets = 0;
  int clears = 0;
};

OverflowRun run_overflow(const std::shared_ptr<const mega::Model>& m, int32_t polls) {
  const int64_t cs = m->hparams().chunk_samples();
  const int32_t nc = m->hparams().n_classes, B = 3;
  OverflowRun out;
  out.batch.resize(B);
  out.single.resize(B);
  std::string err;
  auto step = deferred(m, B, 2, polls);
  DeferredStep* probe = step.get();
  auto batch = mega::create_batch_streams("deferred", m, B, std::move(step), &err, nullptr);
  EXPECT_TRUE(batch) << err;
  if (!batch) return out;
  std::vector<std::unique_ptr<mega::Engine>> single;
  for (int32_t b = 0; b < B; ++b) single.push_back(mega_test::cpu_engine(m));
  std::vector<float> in(size_t(B * cs));
  auto collect = [&](const mega::BatchResult& r) {
    for (int32_t b = 0; b < B; ++b) {
      out.batch[size_t(b)].insert(out.batch[size_t(b)].end(), r.logits + b * nc, r.logits + (b + 1) * nc);
    }
  };
  for (int64_t c = 0; c < 6; ++c) {
    for (int32_t b = 0; b < B; ++b) {
      for (int64_t i = 0; i < cs; ++i) {
        const float tone = b == 1 ? 0.0f : 1e-27f * std::sin(0.01f * float(i + c * cs) * float(b + 1));
        in[size_t(b * cs + i)] = b == 1 && c == 1 ? 1.0f : tone;
      }
    }
    mega::Status s = batch->submit(in.data());
    if (s == mega::Status::busy) {
      mega::BatchResult r;
      EXPECT_EQ(batch->wait(&r), mega::Status::ok);
      collect(r);
      s = batch->submit(in.data());
    }
    EXPECT_EQ(s, mega::Status::ok);
    for (int32_t b = 0; b < B; ++b) {
      int64_t used = 0;
      bool done = false;
      EXPECT_EQ(single[size_t(b)]->push(in.data() + b * cs, cs, &used, &done), mega::Status::ok);
      const float* l = single[size_t(b)]->last_result().logits;
      out.single[size_t(b)].insert(out.single[size_t(b)].end(), l, l + nc);
    }
  }
  mega::BatchResult r;
  while (batch->wait(&r) == mega::Status::ok) collect(r);
  out.batch_resets = batch->stats(1).n_state_resets;
  out.single_resets = single[1]->stats().n_state_resets;
  out.clears = probe->clears;
  return out;
}

TEST(CoreStream, NonFiniteLogitsAreContainedWhenTheStepIsCollected) {
  std::string err;
  const std::vector<uint8_t> bytes = mega_test::overflowing_model();
  auto m = mega::Model::load_from_memory(bytes.data(), bytes.size(), &err);
  ASSERT_TRUE(m) << err;
  const int32_t nc = m->hparams().n_classes;
  // done at launch (a host step): recovered before the next chunk, as a single stream is
  const OverflowRun now = run_overflow(m, 0);
  EXPECT_EQ(now.batch, now.single);
  EXPECT_EQ(now.batch_resets, 1);
  EXPECT_EQ(now.single_resets, 1);
  EXPECT_EQ(now.clears, 1);
  // done later (a GPU): the chunk queued behind the loud one ran on its state
  // and is contained too; the other streams never notice
  const OverflowRun later = run_overflow(m, 2);
  EXPECT_EQ(later.batch[0], later.single[0]);
  EXPECT_EQ(later.batch[2], later.single[2]);
  EXPECT_EQ(later.batch_resets, 2);
  EXPECT_EQ(later.clears, 2);
  ASSERT_EQ(later.batch[1].size(), size_t(6 * nc));
  EXPECT_TRUE(std::all_of(later.batch[1].begin() + nc, later.batch[1].begin() + 3 * nc,
                          [](float v) { return v == 0.0f; }));
  for (float v : later.batch[1]) EXPECT_TRUE(std::isfinite(v));
}

}  // namespace
