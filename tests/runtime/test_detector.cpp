// SPDX-License-Identifier: Apache-2.0
// The detector on synthetic posterior sequences.
#include <gtest/gtest.h>

#include <cmath>

#include "mega/detector.hpp"

namespace {

const std::vector<std::string> kLabels = {"yes", "no", "_silence_", "_unknown_"};

// logits whose softmax is (about) the given probabilities
std::vector<float> logits_for(std::vector<float> p) {
  std::vector<float> l;
  for (float v : p) l.push_back(std::log(std::max(v, 1e-6f)));
  return l;
}

std::unique_ptr<mega::Detector> make(float thr, int smooth, int refractory_ms, int hop_ms = 250, int warmup = 0) {
  mega::DetectorConfig c;
  c.warmup_hops = warmup;
  c.thresholds.assign(kLabels.size(), thr);
  c.smoothing_hops = smooth;
  c.refractory_ms = refractory_ms;
  c.hop_ms = hop_ms;
  std::string err;
  auto d = mega::Detector::create(kLabels, c, &err);
  EXPECT_TRUE(d) << err;
  return d;
}

// runs a sequence of posterior rows; returns (hop, label) of each detection
std::vector<std::pair<int64_t, int>> run(mega::Detector& d, const std::vector<std::vector<float>>& rows) {
  std::vector<std::pair<int64_t, int>> out;
  for (const auto& r : rows) {
    mega::Detection det;
    auto l = logits_for(r);
    if (d.update(l.data(), &det)) out.emplace_back(det.hop_index, det.label);
  }
  return out;
}

const std::vector<float> kQuiet = {0.01f, 0.01f, 0.97f, 0.01f};
const std::vector<float> kYes = {0.9f, 0.04f, 0.03f, 0.03f};
const std::vector<float> kNo = {0.04f, 0.9f, 0.03f, 0.03f};
const std::vector<float> kUnknown = {0.02f, 0.02f, 0.01f, 0.95f};

}  // namespace

TEST(Detector, FiresOncePerWordAboveThreshold) {
  auto d = make(0.8f, 1, 500);
  auto got = run(*d, {kQuiet, kYes, kYes, kYes, kYes, kQuiet, kQuiet});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], std::make_pair(int64_t(1), 0));
}

TEST(Detector, BelowThresholdNeverFires) {
  auto d = make(0.95f, 1, 0);
  EXPECT_TRUE(run(*d, {kYes, kYes, kNo, kQuiet}).empty());
}

TEST(Detector, UnderscoreLabelsNeverFire) {
  auto d = make(0.5f, 1, 0);
  EXPECT_TRUE(run(*d, {kQuiet, kUnknown, kQuiet, kUnknown}).empty());
}

TEST(Detector, SmoothingDelaysAndFiltersSpikes) {
  auto d = make(0.6f, 3, 0);
  // a one-hop spike averages to ~0.31 over 3 hops: no detection
  EXPECT_TRUE(run(*d, {kQuiet, kQuiet, kYes, kQuiet, kQuiet}).empty());
  auto d2 = make(0.6f, 3, 0);
  auto got = run(*d2, {kQuiet, kQuiet, kYes, kYes, kYes, kQuiet});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first, 3);  // mean of (quiet, yes, yes) = 0.6033 >= 0.6 at hop 3
}

TEST(Detector, RefractorySuppressesOtherKeywordsThenReleases) {
  auto d = make(0.8f, 1, 1000, 250);  // 4 hops
  // yes, then "no" right after (a confusable tail): suppressed; later "no" fires
  auto got = run(*d, {kYes, kQuiet, kNo, kQuiet, kQuiet, kQuiet, kNo, kQuiet});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], std::make_pair(int64_t(0), 0));
  EXPECT_EQ(got[1], std::make_pair(int64_t(6), 1));
}

TEST(Detector, LongWordAfterRefractoryDoesNotRetrigger) {
  auto d = make(0.8f, 1, 250, 250);  // 1 hop of refractory
  std::vector<std::vector<float>> rows(10, kYes);
  auto got = run(*d, rows);
  EXPECT_EQ(got.size(), 1u) << "stays above threshold: must not fire again until it drops";
  auto more = run(*d, {kQuiet, kYes});
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(more[0].first, 11);
}

TEST(Detector, RunnerUpAboveThresholdDuringSuppressionStaysQuiet) {
  auto d = make(0.45f, 1, 250, 250);
  const std::vector<float> both = {0.48f, 0.48f, 0.02f, 0.02f};
  auto got = run(*d, {both, both, both, kQuiet});
  ASSERT_EQ(got.size(), 1u);
}

TEST(Detector, ResetAndSensitivity) {
  auto d = make(0.8f, 1, 10000);
  EXPECT_EQ(run(*d, {kYes}).size(), 1u);
  EXPECT_EQ(run(*d, {kQuiet, kYes}).size(), 0u);  // refractory
  d->reset();
  EXPECT_EQ(run(*d, {kYes}).size(), 1u);
  auto t = mega::Detector::apply_sensitivity({0.8f, 0.3f}, 0.5f);
  EXPECT_FLOAT_EQ(t[0], 0.8f);
  t = mega::Detector::apply_sensitivity({0.8f, 0.3f}, 1.0f);
  EXPECT_FLOAT_EQ(t[0], 0.3f);
  EXPECT_FLOAT_EQ(t[1], 0.01f);
  t = mega::Detector::apply_sensitivity({0.8f}, 0.0f);
  EXPECT_FLOAT_EQ(t[0], 0.99f);
}

TEST(Detector, InvalidConfigsAreRefused) {
  std::string err;
  mega::DetectorConfig c;
  c.hop_ms = 250;
  c.thresholds = {0.5f};
  EXPECT_FALSE(mega::Detector::create(kLabels, c, &err));
  EXPECT_NE(err.find("thresholds"), std::string::npos);
  c.thresholds.assign(4, 1.5f);
  EXPECT_FALSE(mega::Detector::create(kLabels, c, &err));
  c.thresholds.assign(4, 0.5f);
  c.smoothing_hops = 0;
  EXPECT_FALSE(mega::Detector::create(kLabels, c, &err));
  c.smoothing_hops = 1;
  c.hop_ms = 0;
  EXPECT_FALSE(mega::Detector::create(kLabels, c, &err));
}

// every detection of a sequence of posterior rows
std::vector<mega::Detection> detections(mega::Detector& d, const std::vector<std::vector<float>>& rows) {
  std::vector<mega::Detection> out;
  for (const auto& r : rows) {
    mega::Detection det;
    auto l = logits_for(r);
    if (d.update(l.data(), &det)) out.push_back(det);
  }
  return out;
}

// Smoothing delays firing; event_hop names the hop in which the word was heard.
TEST(Detector, EventHopIsWhereTheRunOfTheKeywordStarted) {
  const std::vector<float> maybe_yes = {0.55f, 0.05f, 0.2f, 0.2f};  // top label, below threshold
  auto d = make(0.8f, 3, 0);
  auto dets = detections(*d, {kQuiet, kQuiet, maybe_yes, kYes, kYes, kYes, kQuiet});
  ASSERT_EQ(dets.size(), 1u);
  EXPECT_EQ(dets[0].label, 0);
  EXPECT_EQ(dets[0].hop_index, 5);  // mean of (0.55, 0.9, 0.9) < 0.8 at hop 4; 0.9 at hop 5
  EXPECT_EQ(dets[0].event_hop, 3);  // hop 2 is outside the 3 hops that fired
}

TEST(Detector, EventHopStopsAtAnotherLabel) {
  const std::vector<float> maybe_no = {0.05f, 0.55f, 0.2f, 0.2f};
  auto d = make(0.6f, 3, 0);
  auto dets = detections(*d, {maybe_no, kYes, kYes});
  ASSERT_EQ(dets.size(), 1u);
  EXPECT_EQ(dets[0].label, 0);
  EXPECT_EQ(dets[0].hop_index, 2);  // (0.05 + 0.9 + 0.9) / 3 = 0.62
  EXPECT_EQ(dets[0].event_hop, 1);  // hop 0 is inside the span but "no" led there
}

TEST(Detector, EventHopWithoutSmoothingIsTheFiringHop) {
  auto d = make(0.8f, 1, 0);
  auto dets = detections(*d, {kQuiet, kYes, kYes, kQuiet, kQuiet, kYes});
  ASSERT_EQ(dets.size(), 2u);
  EXPECT_EQ(dets[0].hop_index, 1);
  EXPECT_EQ(dets[0].event_hop, 1);
  EXPECT_EQ(dets[1].hop_index, 5);
  EXPECT_EQ(dets[1].event_hop, 5);
}

// a detection's label, firing hop, event hop and score
void expect_detection(const mega::Detection& d, int label, int64_t hop, int64_t event_hop, float score) {
  EXPECT_EQ(d.label, label);
  EXPECT_EQ(d.hop_index, hop);
  EXPECT_EQ(d.event_hop, event_hop);
  EXPECT_NEAR(d.score, score, 1e-3f);
}

// A word in the last hops of a stream: the smoothing window has not filled
// with it when the stream ends; finish() shrinks the window from the end.
TEST(Detector, FinishHearsAWordThatEndsTheStream) {
  auto d = make(0.8f, 3, 1000);
  EXPECT_TRUE(run(*d, {kQuiet, kQuiet, kQuiet, kYes}).empty());  // (0.01 + 0.01 + 0.9) / 3 < 0.8
  mega::Detection det;
  ASSERT_TRUE(d->finish(&det));  // the last hop alone: 0.9
  expect_detection(det, 0, 3, 3, 0.9f);
  EXPECT_FALSE(d->finish(&det));  // at most once: it is now suppressed and disarmed

  // two hops of the word: the mean of the last two is enough
  auto d2 = make(0.8f, 4, 1000);
  EXPECT_TRUE(run(*d2, {kQuiet, kQuiet, kQuiet, kYes, kYes}).empty());
  ASSERT_TRUE(d2->finish(&det));
  EXPECT_EQ(det.hop_index, 4);
  EXPECT_EQ(det.event_hop, 3);
  EXPECT_NEAR(det.score, 0.9f, 1e-3f);
}

TEST(Detector, FinishAddsNothingWhenTheWordAlreadyFiredOrNoneWasSaid) {
  auto d = make(0.6f, 3, 1000);
  ASSERT_EQ(run(*d, {kQuiet, kYes, kYes, kYes}).size(), 1u);  // fired at hop 2 (0.6033), still above
  mega::Detection det;
  EXPECT_FALSE(d->finish(&det));
  auto quiet = make(0.6f, 3, 0);
  EXPECT_TRUE(run(*quiet, {kQuiet, kNo, kQuiet, kQuiet}).empty());
  EXPECT_FALSE(quiet->finish(&det));  // "no" was two hops back: the last hop alone is quiet
  auto fresh = make(0.6f, 3, 0);
  EXPECT_FALSE(fresh->finish(&det));  // no hop seen
  auto one_hop = make(0.8f, 1, 0);     // without smoothing there is nothing to shrink
  EXPECT_TRUE(run(*one_hop, {kQuiet, {0.7f, 0.1f, 0.1f, 0.1f}}).empty());
  EXPECT_FALSE(one_hop->finish(&det));
}

// Issue 85 item 2: the first hops of a stream (warmup_hops: the model filling
// its window) neither fire nor enter the smoothing average, so a spike there
// (a tone read as "go" while the window fills) is no detection; a word said
// from the very first hop still fires once the warm-up is over, and its event
// hop reaches back to where it began.
TEST(Detector, WarmupHopsNeitherFireNorEnterTheAverage) {
  auto d = make(0.8f, 3, 0, 250, 2);
  EXPECT_TRUE(run(*d, {kYes, kYes, kUnknown, kUnknown, kQuiet, kQuiet}).empty());
  mega::Detection det;
  EXPECT_FALSE(d->finish(&det));  // nor at the end: the warm-up is not judged once the stream is past it
  auto plain = make(0.8f, 3, 0, 250, 0);  // without a warm-up the same spike fires at hop 0
  EXPECT_EQ(run(*plain, {kYes, kYes, kUnknown, kUnknown, kQuiet, kQuiet}).size(), 1u);
}

TEST(Detector, AKeywordFromTheFirstHopFiresAfterTheWarmup) {
  auto d = make(0.8f, 3, 0, 250, 2);
  auto dets = detections(*d, {kYes, kYes, kYes, kYes, kQuiet, kQuiet});
  ASSERT_EQ(dets.size(), 1u);
  // fired at hop 2 (the first after the warm-up, alone: 0.9), heard from hop 0 on
  expect_detection(dets[0], 0, 2, 0, 0.9f);
}

// A stream that ends within its warm-up (a clip no longer than the model's
// window) is judged at its end over all its hops, so a one-second clip of a
// keyword is heard; one that holds no keyword gives nothing.
TEST(Detector, FinishJudgesAClipThatEndedInItsWarmup) {
  auto d = make(0.8f, 5, 1000, 250, 4);
  EXPECT_TRUE(run(*d, {kQuiet, kYes, kYes, kYes}).empty());
  mega::Detection det;
  ASSERT_TRUE(d->finish(&det));  // the last three hops: 0.9
  expect_detection(det, 0, 3, 1, 0.9f);
  auto spike = make(0.8f, 5, 1000, 250, 4);
  EXPECT_TRUE(run(*spike, {kYes, kUnknown, kUnknown, kUnknown}).empty());
  EXPECT_FALSE(spike->finish(&det));
}

// Issue 85 item 6: 0.5 keeps every stored threshold exactly; below 0.5 (fire
// less) none falls, above 0.5 (fire more) none rises, clamps included.
TEST(Detector, SensitivityNeverMovesAThresholdTheWrongWay) {
  const std::vector<float> stored = {0.995f, 0.005f, 0.5f, 1.0f};
  EXPECT_EQ(mega::Detector::apply_sensitivity(stored, 0.5f), stored);
  for (float s : {0.0f, 0.2f, 0.49f, 0.5f, 0.51f, 0.8f, 1.0f}) {
    const std::vector<float> t = mega::Detector::apply_sensitivity(stored, s);
    for (size_t i = 0; i < stored.size(); ++i) {
      if (s <= 0.5f) {
        EXPECT_GE(t[i], stored[i]) << "sensitivity " << s << ", threshold " << stored[i];
      }
      if (s >= 0.5f) {
        EXPECT_LE(t[i], stored[i]) << "sensitivity " << s << ", threshold " << stored[i];
      }
      EXPECT_TRUE(t[i] > 0.0f && t[i] <= 1.0f);
    }
  }
  EXPECT_FLOAT_EQ(mega::Detector::apply_sensitivity(stored, 0.0f)[2], 0.99f);  // raised by 0.5, clamped
  EXPECT_FLOAT_EQ(mega::Detector::apply_sensitivity(stored, 1.0f)[0], 0.495f);
  EXPECT_FLOAT_EQ(mega::Detector::apply_sensitivity(stored, 1.0f)[2], 0.01f);   // lowered by 0.5, clamped
}
