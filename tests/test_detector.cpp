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

std::unique_ptr<mega::Detector> make(float thr, int smooth, int refractory_ms, int hop_ms = 250) {
  mega::DetectorConfig c;
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

// A word in the last hops of a stream: the smoothing window has not filled
// with it when the stream ends; finish() shrinks the window from the end.
TEST(Detector, FinishHearsAWordThatEndsTheStream) {
  auto d = make(0.8f, 3, 1000);
  EXPECT_TRUE(run(*d, {kQuiet, kQuiet, kQuiet, kYes}).empty());  // (0.01 + 0.01 + 0.9) / 3 < 0.8
  mega::Detection det;
  ASSERT_TRUE(d->finish(&det));  // the last hop alone: 0.9
  EXPECT_EQ(det.label, 0);
  EXPECT_EQ(det.hop_index, 3);
  EXPECT_EQ(det.event_hop, 3);
  EXPECT_NEAR(det.score, 0.9f, 1e-3f);
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
