// SPDX-License-Identifier: Apache-2.0
// Bad model files: each refused with its own clear message, never a crash
// (this file also runs under AddressSanitizer in CI).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <future>
#include <iterator>
#include <random>

#include "fp16_peak_edit.h"
#include "golden.h"
#include "mega_reseal.h"
#include "mega/engine.hpp"
#include "mega/mega.hpp"
#include "mega_model_generated.h"

namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

struct Result {
  bool loaded = false;
  mega::Status status = mega::Status::ok;
  std::string error;
};

Result load_bytes(const std::vector<uint8_t>& b) {
  Result r;
  r.loaded = mega::Model::load_from_memory(b.data(), b.size(), &r.error, &r.status) != nullptr;
  return r;
}

Result load_file(const std::string& path) {
  Result r;
  r.loaded = mega::Model::load(path, &r.error, &r.status) != nullptr;
  return r;
}

}  // namespace

TEST(ModelFile, GoodFileLoadsFromDiskAndMemory) {
  const std::string path = mega_test::fixture_path("good_tiny.mega");
  Result a = load_file(path);
  EXPECT_TRUE(a.loaded) << a.error;
  Result b = load_bytes(read_bytes(path));
  EXPECT_TRUE(b.loaded) << b.error;
  std::string err;
  auto m = mega::Model::load(path, &err);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->labels().size(), 4u);
  EXPECT_EQ(m->info().schema_version, 1u);
  EXPECT_GT(m->info().n_params, 1000);
}

// Linear-feature files stay schema 1 (readable by older runtimes); log-power
// ones say 2, with a running mean 3, log-mel 4, so a runtime that cannot
// compute them refuses them.
TEST(ModelFile, PatchFeaturesAndTheSchemaTheyNeed) {
  std::string err;
  auto lin = mega::Model::load(mega_test::fixture_path("tiny_patch.mega"), &err);
  ASSERT_TRUE(lin) << err;
  EXPECT_EQ(lin->info().schema_version, 1u);
  EXPECT_EQ(lin->hparams().patch_features, mega::PatchFeatures::linear);
  auto lp = mega::Model::load(mega_test::fixture_path("tiny_logpower.mega"), &err);
  ASSERT_TRUE(lp) << err;
  EXPECT_EQ(lp->info().schema_version, 2u);
  EXPECT_EQ(lp->hparams().patch_features, mega::PatchFeatures::log_power);
  EXPECT_FLOAT_EQ(lp->hparams().patch_log_eps, 1e-6f);
  EXPECT_EQ(lp->hparams().patch_norm, mega::PatchNorm::off);
  auto ln = mega::Model::load(mega_test::fixture_path("tiny_lognorm.mega"), &err);
  ASSERT_TRUE(ln) << err;
  EXPECT_EQ(ln->info().schema_version, 3u);
  EXPECT_EQ(ln->hparams().patch_norm, mega::PatchNorm::running_mean);
  EXPECT_FLOAT_EQ(ln->hparams().patch_norm_decay, 0.05f);
  auto lm = mega::Model::load(mega_test::fixture_path("tiny_logmel.mega"), &err);
  ASSERT_TRUE(lm) << err;
  EXPECT_EQ(lm->info().schema_version, 4u);
  EXPECT_EQ(lm->hparams().patch_features, mega::PatchFeatures::log_mel);
  EXPECT_EQ(lm->hparams().patch_bins, 15);  // 500 Hz to 7.5 kHz of a 32-point spectrum
  EXPECT_EQ(lm->hparams().patch_bands, 6);
}

TEST(ModelFile, EachBrokenFileHasItsOwnMessage) {
  struct Case {
    const char* file;
    mega::Status status;
    const char* needle;
  };
  const Case cases[] = {
      {"bad_identifier.mega", mega::Status::bad_model, "not a .mega model file"},
      {"bad_schema_newer.mega", mega::Status::unsupported_model, "schema version 7 is newer"},
      {"bad_missing_tensor.mega", mega::Status::bad_model, "missing tensor 'layers.1.mega_layer.h_proj.bias'"},
      {"bad_wrong_shape.mega", mega::Status::bad_model,
       "tensor 'layers.0.mega_layer.v_proj.weight' has shape [8, 12], expected [12, 8]"},
      {"bad_nan_weight.mega", mega::Status::bad_model, "tensor 'layers.0.nffn.fc1.weight' contains a non-finite"},
      {"bad_extra_tensor.mega", mega::Status::bad_model, "unexpected tensor 'layers.0.mega_layer.rotary.alpha'"},
      {"bad_norm_decay.mega", mega::Status::bad_model, "patch_norm_decay must be between 0 and 1"},
      {"bad_norm_linear.mega", mega::Status::bad_model, "patch_norm running_mean needs log_power patch features"},
      {"bad_mel_band.mega", mega::Status::bad_model, "'embed_tokens.bands' has a negative weight at element 3"},
      {"bad_threshold_zero.mega", mega::Status::bad_model,
       "detection threshold of label 'class0' is 0; thresholds must be in (0, 1]"},
      {"bad_duplicate_label.mega", mega::Status::bad_model, "label 'class1' appears twice (labels 1 and 2)"},
  };
  for (const Case& c : cases) {
    Result r = load_file(mega_test::fixture_path(c.file));
    EXPECT_FALSE(r.loaded) << c.file;
    EXPECT_EQ(r.status, c.status) << c.file << ": " << r.error;
    EXPECT_NE(r.error.find(c.needle), std::string::npos) << c.file << ": " << r.error;
  }
}

TEST(ModelFile, MissingFileDirectoryAndEmptyFile) {
  Result r = load_file("/nonexistent/model.mega");
  EXPECT_EQ(r.status, mega::Status::io_error);
  EXPECT_NE(r.error.find("cannot open"), std::string::npos) << r.error;
  r = load_file(MEGA_FIXTURES);
  EXPECT_EQ(r.status, mega::Status::io_error);
  EXPECT_NE(r.error.find("not a regular file"), std::string::npos) << r.error;
  r = load_bytes({});
  EXPECT_EQ(r.status, mega::Status::bad_model);
  EXPECT_NE(r.error.find("too small"), std::string::npos) << r.error;
}

// A FIFO as the model path: refused at once, not a wait for a writer that never comes.
TEST(ModelFile, FifoIsRefusedWithoutBlocking) {
  char dir[] = "/tmp/mega_fifo.XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  const std::string fifo = std::string(dir) + "/model.mega";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto loading = std::async(std::launch::async, [&] { return load_file(fifo); });
  const bool returned = loading.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!returned) {  // blocked in open(): be the writer it waits for, so that the test can end
    const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) ::close(w);
  }
  const Result r = loading.get();
  EXPECT_TRUE(returned) << "loading a FIFO blocked";
  EXPECT_FALSE(r.loaded);
  EXPECT_EQ(r.status, mega::Status::io_error);
  EXPECT_NE(r.error.find("not a regular file"), std::string::npos) << r.error;
  ::unlink(fifo.c_str());
  ::rmdir(dir);
}

TEST(ModelFile, TruncatedAtManyOffsetsIsRefused) {
  const auto good = read_bytes(mega_test::fixture_path("good_tiny.mega"));
  ASSERT_GT(good.size(), 1000u);
  for (size_t len : {size_t(1), size_t(8), size_t(27), size_t(28), size_t(100), good.size() / 3, good.size() / 2,
                     good.size() - 13, good.size() - 12, good.size() - 1}) {
    std::vector<uint8_t> b(good.begin(), good.begin() + long(len));
    Result r = load_bytes(b);
    EXPECT_FALSE(r.loaded) << len;
    EXPECT_EQ(r.status, mega::Status::bad_model) << len;
    EXPECT_FALSE(r.error.empty());
  }
}

TEST(ModelFile, EveryFlippedByteIsCaughtByTheChecksum) {
  const auto good = read_bytes(mega_test::fixture_path("good_tiny.mega"));
  std::mt19937 rng(42);
  for (int i = 0; i < 300; ++i) {
    auto b = good;
    const size_t at = rng() % (b.size() - 12);
    b[at] ^= uint8_t(1 + rng() % 255);
    Result r = load_bytes(b);
    ASSERT_FALSE(r.loaded) << "flip at " << at;
    if (at >= 8) {  // the identifier is checked first
      EXPECT_NE(r.error.find("checksum mismatch"), std::string::npos) << at << ": " << r.error;
    }
  }
}

TEST(ModelFile, DamagedStructureWithValidChecksumNeverCrashes) {
  // The checksum is resealed, so the FlatBuffers verifier and the semantic
  // checks see the damage: loading may succeed (a flip inside weights) or
  // fail, but must not crash or read out of bounds.
  const auto good = read_bytes(mega_test::fixture_path("good_tiny.mega"));
  std::mt19937 rng(7);
  int refused = 0;
  for (int i = 0; i < 2000; ++i) {
    auto b = good;
    const int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; ++f) b[8 + rng() % (b.size() - 20)] ^= uint8_t(1 + rng() % 255);
    mega::reseal_trailer(&b);
    Result r = load_bytes(b);
    if (!r.loaded) {
      ++refused;
      EXPECT_FALSE(r.error.empty());
    } else {
      // whatever loaded must still run
      std::string err;
      auto m = mega::Model::load_from_memory(b.data(), b.size(), &err);
      auto s = mega::create_engine("cpu", m, mega::EngineOptions(), &err);
      ASSERT_TRUE(s) << err;
      float diff = 0.0f;
      s->self_test(&diff);
    }
  }
  EXPECT_GT(refused, 0);
}

TEST(ModelFile, WrongTrailerLength) {
  auto b = read_bytes(mega_test::fixture_path("good_tiny.mega"));
  b.insert(b.end() - 12, uint8_t(0));  // one stray byte before the trailer
  Result r = load_bytes(b);
  EXPECT_FALSE(r.loaded);
  EXPECT_NE(r.error.find("end marker says"), std::string::npos) << r.error;
}

// good_tuned.mega stores detection defaults (thresholds 0.5, 0.625, 0.75,
// 0.875; smoothing 3 hops; refractory 500 ms). Each case alters one stored
// value or label in place and reseals the file: the loader must refuse what
// the detector would refuse later (keyword_spotter scan's "bad detection
// settings" with no option given), naming it.
namespace {

// Bytes written one by one at an offset into the buffer: a memcpy to
// b->data() + offset here draws GCC 12's -Wstringop-overflow (a false
// positive) in the sanitizer build, where warnings are errors.
void put_bytes(std::vector<uint8_t>* b, const void* where, const void* bytes, size_t n) {
  const size_t at = size_t(static_cast<const uint8_t*>(where) - b->data());
  ASSERT_LE(at + n, b->size());
  for (size_t k = 0; k < n; ++k) (*b)[at + k] = static_cast<const uint8_t*>(bytes)[k];
}

template <typename T>
void poke(std::vector<uint8_t>* b, const void* where, T value) {
  put_bytes(b, where, &value, sizeof value);
}

struct TunedEdit {
  const char* what;
  void (*edit)(std::vector<uint8_t>* b, const mega::fb::Model* m);
  const char* needle;  // null: the edited file still loads
};

const uint8_t* detection_field(const mega::fb::Model* m, flatbuffers::voffset_t field) {
  // the generated table hides Table::GetAddressOf; the field must be stored (not the schema default)
  return reinterpret_cast<const flatbuffers::Table*>(m->detection())->GetAddressOf(field);
}

void set_label(std::vector<uint8_t>* b, const mega::fb::Model* m, int i, const char* text) {
  const flatbuffers::String* s = m->labels()->Get(flatbuffers::uoffset_t(i));
  const size_t n = std::strlen(text);
  ASSERT_LE(n, s->size());
  poke(b, s, uint32_t(n));  // the length prefix
  put_bytes(b, s->c_str(), text, n + 1);
}

}  // namespace

TEST(ModelFile, StoredDetectionDefaultsAreCheckedAtLoad) {
  const auto good = read_bytes(mega_test::fixture_path("good_tuned.mega"));
  std::string err;
  auto tuned = mega::Model::load_from_memory(good.data(), good.size(), &err);
  ASSERT_TRUE(tuned) << err;
  EXPECT_EQ(tuned->info().detection.thresholds, (std::vector<float>{0.5f, 0.625f, 0.75f, 0.875f}));
  EXPECT_EQ(tuned->info().detection.smoothing_hops, 3);
  EXPECT_EQ(tuned->info().detection.refractory_ms, 500);
  using mega::fb::Detection;
  const TunedEdit edits[] = {
      {"threshold 0", [](auto* b, auto* m) { poke(b, m->detection()->thresholds()->data() + 2, 0.0f); },
       "detection threshold of label 'class2' is 0; thresholds must be in (0, 1]"},
      {"threshold NaN", [](auto* b, auto* m) { poke(b, m->detection()->thresholds()->data() + 1, NAN); },
       "detection threshold of label 'class1' is nan"},
      {"threshold -0.25", [](auto* b, auto* m) { poke(b, m->detection()->thresholds()->data() + 3, -0.25f); },
       "detection threshold of label 'class3' is -0.25"},
      {"threshold 1.5", [](auto* b, auto* m) { poke(b, m->detection()->thresholds()->data(), 1.5f); },
       "detection threshold of label 'class0' is 1.5"},
      {"threshold 1", [](auto* b, auto* m) { poke(b, m->detection()->thresholds()->data(), 1.0f); }, nullptr},
      {"threshold 1e-6", [](auto* b, auto* m) { poke(b, m->detection()->thresholds()->data(), 1e-6f); }, nullptr},
      {"smoothing 0", [](auto* b, auto* m) { poke(b, detection_field(m, Detection::VT_SMOOTHING_HOPS), 0); },
       "detection smoothing_hops = 0 is out of range [1, 1024]"},
      {"smoothing 1025", [](auto* b, auto* m) { poke(b, detection_field(m, Detection::VT_SMOOTHING_HOPS), 1025); },
       "detection smoothing_hops = 1025 is out of range [1, 1024]"},
      {"refractory -1", [](auto* b, auto* m) { poke(b, detection_field(m, Detection::VT_REFRACTORY_MS), -1); },
       "detection refractory_ms = -1 is out of range [0, 600000]"},
      {"refractory 600001",
       [](auto* b, auto* m) { poke(b, detection_field(m, Detection::VT_REFRACTORY_MS), 600001); },
       "detection refractory_ms = 600001 is out of range [0, 600000]"},
      {"duplicate label", [](auto* b, auto* m) { set_label(b, m, 3, "class0"); },
       "label 'class0' appears twice (labels 0 and 3)"},
      {"empty label", [](auto* b, auto* m) { set_label(b, m, 2, ""); }, "label 2 is empty"},
      {"distinct label", [](auto* b, auto* m) { set_label(b, m, 2, "go"); }, nullptr},
  };
  for (const TunedEdit& e : edits) {
    auto b = good;
    e.edit(&b, mega::fb::GetModel(b.data()));
    mega::reseal_trailer(&b);
    Result r = load_bytes(b);
    if (!e.needle) {
      EXPECT_TRUE(r.loaded) << e.what << ": " << r.error;
      continue;
    }
    EXPECT_FALSE(r.loaded) << e.what;
    EXPECT_EQ(r.status, mega::Status::bad_model) << e.what << ": " << r.error;
    EXPECT_NE(r.error.find(e.needle), std::string::npos) << e.what << ": " << r.error;
  }
}

// Schema 5: the float16 peaks the converter stores are read with the model
// (the CUDA backend decides float16 storage from them), files without them
// load as before, and a stored peak that is no magnitude is refused by name.
TEST(ModelFile, Fp16PeaksAreReadAndChecked) {
  auto m = mega_test::load_model(mega_test::fixture_path("good_tiny.mega"));
  ASSERT_TRUE(m);
  const mega::Fp16Peaks& p = m->info().fp16_peaks;
  ASSERT_TRUE(p.present);
  for (const mega::Fp16Peak* k : {&p.residual, &p.other}) {
    EXPECT_GT(k->value, 0.0f);
    EXPECT_FALSE(k->tensor.empty());
    EXPECT_GE(k->layer, -1);
    EXPECT_LT(k->layer, m->hparams().n_layers);
  }
  auto old = mega_test::load_model(mega_test::fixture_path("good_no_fp16_range.mega"));
  ASSERT_TRUE(old);
  EXPECT_FALSE(old->info().fp16_peaks.present);

  const auto good = read_bytes(mega_test::fixture_path("good_tiny.mega"));
  for (const float bad : {-1.0f, NAN}) {
    for (const bool residual : {true, false}) {
      Result r = load_bytes(mega_test::with_fp16_peak(good, residual, bad));
      EXPECT_FALSE(r.loaded);
      EXPECT_EQ(r.status, mega::Status::bad_model) << r.error;
      const std::string field = residual ? "fp16_range.residual.value" : "fp16_range.other.value";
      EXPECT_NE(r.error.find(field), std::string::npos) << r.error;
    }
  }
  EXPECT_TRUE(load_bytes(mega_test::with_fp16_peak(good, true, INFINITY)).loaded);  // the converter saw Inf or NaN
}
