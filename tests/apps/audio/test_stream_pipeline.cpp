// SPDX-License-Identifier: Apache-2.0
// keyword_spotter's streaming path (apps/audio/stream_pipeline.h)
// driven by an in-memory audio source, the way the microphone (listen) and
// files (scan) drive it: the same chunks, logits and detections as the
// session and detector fed directly; stereo averaged; a source at another
// rate resampled, its resampler's tail kept; the end of a source completed
// with silence; stopping at a sample limit or on a flag; a failing source
// reported; and no allocation while streaming. scan's file source gives the
// file's own rate, resampled by the pipeline to what classify's reader gives.
// A binary of its own: it links the app's code and replaces the allocator
// (alloc_counter.cpp).
#include <gtest/gtest.h>
#include <samplerate.h>
#include <sndfile.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "audio_file.h"
#include "audio_source.h"
#include "mega/detector.hpp"
#include "mega/engine.hpp"
#include "resampler.h"
#include "stream_pipeline.h"

namespace {

// Frames from memory, at most per_poll of them per poll() (as a device
// delivers a buffer at a time), then the end, or a failure once the ring has
// been drained.
class MemorySource : public kws::AudioSource {
 public:
  MemorySource(std::vector<float> frames, int channels, double rate, size_t per_poll, bool fail_at_end = false)
      : frames_(std::move(frames)), channels_(channels), rate_(rate), per_poll_(per_poll),
        fail_at_end_(fail_at_end), ring_(4096, size_t(channels)) {}
  kws::AudioFormat format() const override { return {channels_, rate_}; }
  kws::SpscRing<float>& ring() override { return ring_; }
  kws::SourceState poll() override {
    const size_t n_frames = frames_.size() / size_t(channels_);
    if (pos_ < n_frames) {
      const size_t n = std::min({per_poll_, n_frames - pos_, ring_.write_available()});
      pos_ += ring_.write(frames_.data() + pos_ * size_t(channels_), n);
      return kws::SourceState::running;
    }
    if (!fail_at_end_) return kws::SourceState::ended;
    if (ring_.read_available() > 0) return kws::SourceState::running;
    error_ = "unplugged";
    return kws::SourceState::failed;
  }
  const std::string& error() const override { return error_; }

 private:
  std::vector<float> frames_;
  int channels_;
  double rate_;
  size_t per_poll_, pos_ = 0;
  bool fail_at_end_;
  kws::SpscRing<float> ring_;
  std::string error_;
};

// What came out: every chunk's end and logits, every detection. Allocates
// nothing while recording (room reserved up front).
struct Recorder : kws::StreamObserver {
  explicit Recorder(int classes) : n_classes(classes) {
    chunk_ends.reserve(4096);
    logits.reserve(4096 * size_t(n_classes));
    detections.reserve(256);
  }
  void on_chunk(const mega::ChunkResult& r) override {
    chunk_ends.push_back(r.end_sample);
    logits.insert(logits.end(), r.logits, r.logits + n_classes);
  }
  void on_detection(int64_t end_sample, const mega::Detection& d) override {
    detections.push_back({end_sample, d.label});
  }
  int n_classes;
  std::vector<int64_t> chunk_ends;
  std::vector<float> logits;
  std::vector<std::pair<int64_t, int32_t>> detections;
};

struct Rig {
  std::shared_ptr<const mega::Model> model;
  std::unique_ptr<mega::Engine> session;
  std::unique_ptr<mega::Detector> detector;
};

Rig make_rig() {
  Rig r;
  std::string err;
  r.model = mega::Model::load(std::string(MEGA_MODELS) + "/sc10-demo.mega", &err);
  EXPECT_TRUE(r.model) << err;
  if (!r.model) return r;
  r.session = mega::create_engine("cpu", r.model, mega::EngineOptions(), &err);
  EXPECT_TRUE(r.session) << err;
  mega::DetectorOverrides o;
  o.sensitivity = 0.8f;  // the model's defaults are strict; at 0.8 it finds all five words of commands.wav
  r.detector = mega::Detector::for_model(*r.model, o, &err);
  EXPECT_TRUE(r.detector) << err;
  return r;
}

// samples/commands.wav (yes stop go left no) at the model's rate.
std::vector<float> commands() {
  std::vector<float> x;
  kws::AudioInfo info;
  std::string err;
  EXPECT_TRUE(kws::read_audio_file(std::string(MEGA_SAMPLES) + "/commands.wav", 16000, 60.0, &x, &info, &err)) << err;
  return x;
}

// The session and the detector fed directly, the end padded to a whole chunk.
Recorder direct(std::vector<float> x) {
  Rig r = make_rig();
  Recorder rec(r.model->hparams().n_classes);
  const int64_t cs = r.model->hparams().chunk_samples();
  x.resize(size_t((int64_t(x.size()) + cs - 1) / cs * cs), 0.0f);
  mega::Detection d;
  EXPECT_EQ(r.session->push_all(x.data(), int64_t(x.size()), [&](const mega::ChunkResult& c) {
    rec.on_chunk(c);
    if (r.detector->update(c.logits, &d)) rec.on_detection(c.end_sample, d);
  }), mega::Status::ok);
  return rec;
}

std::vector<std::string> labels(const mega::Model& m, const Recorder& rec) {
  std::vector<std::string> out;
  for (const auto& d : rec.detections) out.push_back(m.labels()[size_t(d.second)]);
  return out;
}

TEST(StreamPipeline, MonoGivesWhatTheSessionGivesFedDirectly) {
  const std::vector<float> x = commands();
  Rig r = make_rig();
  MemorySource src(x, 1, 16000.0, 777);  // buffers that never line up with chunks or ring blocks
  std::string err;
  auto p = kws::StreamPipeline::create(src, *r.session, *r.detector, &err);
  ASSERT_TRUE(p) << err;
  EXPECT_FALSE(p->resampling());
  Recorder rec(r.model->hparams().n_classes);
  EXPECT_EQ(p->run(kws::StreamOptions(), rec), kws::StreamEnd::ended);
  const Recorder want = direct(x);
  EXPECT_EQ(rec.chunk_ends, want.chunk_ends);
  EXPECT_EQ(rec.logits, want.logits);
  EXPECT_EQ(rec.detections, want.detections);
  EXPECT_EQ(labels(*r.model, rec), (std::vector<std::string>{"yes", "stop", "go", "left", "no"}));
  EXPECT_EQ(p->stats().n_samples, int64_t(x.size()));  // the end's silence not counted
  EXPECT_EQ(p->stats().n_chunks, int64_t(want.chunk_ends.size()));
  EXPECT_EQ(p->stats().n_detections, int64_t(want.detections.size()));
}

TEST(StreamPipeline, StereoIsAveraged) {
  const std::vector<float> x = commands();
  std::vector<float> stereo(2 * x.size(), 0.0f), half(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    stereo[2 * i] = x[i];  // left only: the average is half of it
    half[i] = 0.5f * x[i];
  }
  Rig r = make_rig();
  MemorySource src(stereo, 2, 16000.0, 1000);
  std::string err;
  auto p = kws::StreamPipeline::create(src, *r.session, *r.detector, &err);
  ASSERT_TRUE(p) << err;
  Recorder rec(r.model->hparams().n_classes);
  EXPECT_EQ(p->run(kws::StreamOptions(), rec), kws::StreamEnd::ended);
  const Recorder want = direct(half);
  EXPECT_EQ(rec.chunk_ends, want.chunk_ends);
  EXPECT_EQ(rec.logits, want.logits);
  EXPECT_EQ(rec.detections, want.detections);
}

TEST(StreamPipeline, OtherRatesAreResampledToTheModels) {
  const std::vector<float> x = commands();
  std::vector<float> x48(x.size() * 3 + 256);
  SRC_DATA d{};
  d.data_in = x.data();
  d.input_frames = long(x.size());
  d.data_out = x48.data();
  d.output_frames = long(x48.size());
  d.src_ratio = 3.0;
  ASSERT_EQ(src_simple(&d, SRC_SINC_MEDIUM_QUALITY, 1), 0);
  x48.resize(size_t(d.output_frames_gen));
  Rig r = make_rig();
  MemorySource src(x48, 1, 48000.0, 1024);
  std::string err;
  auto p = kws::StreamPipeline::create(src, *r.session, *r.detector, &err);
  ASSERT_TRUE(p) << err;
  EXPECT_TRUE(p->resampling());
  Recorder rec(r.model->hparams().n_classes);
  EXPECT_EQ(p->run(kws::StreamOptions(), rec), kws::StreamEnd::ended);
  // 16 kHz -> 48 kHz -> 16 kHz: each resampler's tail flushed, so about as many samples as went in
  EXPECT_NEAR(double(p->stats().n_samples), double(x.size()), 2.0);
  EXPECT_EQ(labels(*r.model, rec), (std::vector<std::string>{"yes", "stop", "go", "left", "no"}));
}

// 3.14 s of a tone at `rate`: not a whole number of chunks at any rate.
std::vector<float> odd_length_tone(int rate) {
  std::vector<float> x(size_t(rate) * 3 + size_t(rate / 7));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.3f * float(std::sin(0.05 * double(i)));
  return x;
}

// Streams src to its end through a fresh session and detector: the model-rate samples streamed (-1: not ended).
double streamed_samples(kws::AudioSource& src) {
  Rig r = make_rig();
  std::string err;
  auto p = kws::StreamPipeline::create(src, *r.session, *r.detector, &err);
  EXPECT_TRUE(p) << err;
  Recorder rec(r.model->hparams().n_classes);
  if (!p || p->run(kws::StreamOptions(), rec) != kws::StreamEnd::ended) return -1.0;
  return double(p->stats().n_samples);
}

// A source at another rate that ends: the resampler's tail (its filter's
// delay) is flushed into the stream before the end's silence, so the whole
// source is streamed (an 8 kHz source lost its last 94 samples, a 1 kHz one 752: 47 ms).
TEST(StreamPipeline, AResampledSourceIsStreamedWholeToItsEnd) {
  for (int rate : {8000, 1000, 44100}) {
    const std::vector<float> x = odd_length_tone(rate);
    MemorySource src(x, 1, double(rate), 700);
    EXPECT_NEAR(streamed_samples(src), double(x.size()) * 16000.0 / rate, 1.0) << rate << " Hz";
  }
}

// The one mix-down and resampler that files (audio_file.cpp) and streams
// (stream_pipeline.cpp) both go through.
TEST(Resampler, AveragesChannels) {
  const float inter[] = {1.0f, 2.0f, 6.0f, -1.0f, 1.0f, 0.5f};
  float mono[2] = {};
  kws::mix_to_mono(inter, 3, 2, mono);
  EXPECT_EQ(mono[0], 3.0f);
  EXPECT_EQ(mono[1], float(0.5 / 3));
}

// A block at a time (a stream) or all at once (a file), the same samples; at
// the end the filter's tail is flushed, so nothing of the input is lost.
TEST(Resampler, BlocksGiveWhatOneCallGivesAndTheTailIsKept) {
  const std::vector<float> x = commands();
  std::string err;
  auto whole = kws::Resampler::create(16000.0, 48000.0, &err);
  auto blocks = kws::Resampler::create(16000.0, 48000.0, &err);
  ASSERT_TRUE(whole && blocks) << err;
  EXPECT_EQ(whole->ratio(), 3.0);
  auto drain = [](kws::Resampler& r, const float* in, int64_t n, bool end, std::vector<float>* out) {
    std::vector<float> buf(3000);
    std::string why;
    for (;;) {
      int64_t used = 0, made = 0;
      ASSERT_TRUE(r.process(in, n, end, buf.data(), int64_t(buf.size()), &used, &made, &why)) << why;
      out->insert(out->end(), buf.begin(), buf.begin() + made);
      in += used;
      n -= used;
      if (used == 0 && made == 0) return;
    }
  };
  std::vector<float> a, b;
  drain(*whole, x.data(), int64_t(x.size()), true, &a);
  for (size_t at = 0; at < x.size(); at += 777) {
    drain(*blocks, x.data() + at, int64_t(std::min<size_t>(777, x.size() - at)), false, &b);
  }
  drain(*blocks, nullptr, 0, true, &b);
  EXPECT_NEAR(double(a.size()), 3.0 * double(x.size()), 2.0);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6f) << i;
}

// A word in a source that ends inside a chunk: the chunk is completed with
// silence, but the detection is timed no later than the end of the audio
// (0.156 s of "yes" was reported at 0.250 s, the end of the padded chunk).
TEST(StreamPipeline, ADetectionAtTheEndIsTimedNoLaterThanTheAudio) {
  std::vector<float> yes;
  kws::AudioInfo info;
  std::string err;
  ASSERT_TRUE(kws::read_audio_file(std::string(MEGA_SAMPLES) + "/yes.wav", 16000, 60.0, &yes, &info, &err)) << err;
  const std::vector<float> x(yes.begin() + 3200, yes.begin() + 3200 + 2496);  // 0.2 s in, 0.156 s long
  Rig r = make_rig();
  const mega::HParams& hp = r.model->hparams();
  ASSERT_NE(int64_t(x.size()) % hp.chunk_samples(), 0);
  struct Times : kws::StreamObserver {
    explicit Times(const mega::HParams& h) : hp(h) {}
    void on_detection(int64_t end_sample, const mega::Detection& d) override {
      times.push_back(mega::Detector::event_time_s(d, end_sample, hp.chunk_samples(), hp.sample_rate));
    }
    const mega::HParams& hp;
    std::vector<double> times;
  } out(hp);
  MemorySource src(x, 1, 16000.0, 500);
  auto p = kws::StreamPipeline::create(src, *r.session, *r.detector, &err);
  ASSERT_TRUE(p) << err;
  EXPECT_EQ(p->run(kws::StreamOptions(), out), kws::StreamEnd::ended);
  ASSERT_FALSE(out.times.empty());
  for (double t : out.times) EXPECT_LE(t, double(x.size()) / hp.sample_rate);
}

TEST(StreamPipeline, StopsAtTheSampleLimitWithoutPadding) {
  Rig r = make_rig();
  MemorySource src(commands(), 1, 16000.0, 500);
  std::string err;
  auto p = kws::StreamPipeline::create(src, *r.session, *r.detector, &err);
  ASSERT_TRUE(p) << err;
  kws::StreamOptions opts;
  opts.max_samples = 12345;
  Recorder rec(r.model->hparams().n_classes);
  EXPECT_EQ(p->run(opts, rec), kws::StreamEnd::stopped);
  EXPECT_EQ(p->stats().n_samples, 12345);
  EXPECT_EQ(p->stats().n_chunks, 12345 / r.model->hparams().chunk_samples());
}

TEST(StreamPipeline, StopsOnTheFlag) {
  Rig r = make_rig();
  MemorySource src(commands(), 1, 16000.0, 500);
  std::string err;
  auto p = kws::StreamPipeline::create(src, *r.session, *r.detector, &err);
  ASSERT_TRUE(p) << err;
  volatile std::sig_atomic_t stop = SIGTERM;
  kws::StreamOptions opts;
  opts.stop = &stop;
  Recorder rec(r.model->hparams().n_classes);
  EXPECT_EQ(p->run(opts, rec), kws::StreamEnd::stopped);
  EXPECT_EQ(p->stats().n_samples, 0);
}

TEST(StreamPipeline, ReportsAFailingSourceAfterItsLastFrames) {
  const std::vector<float> x(10000, 0.01f);
  Rig r = make_rig();
  MemorySource src(x, 1, 16000.0, 3000, /*fail_at_end=*/true);
  std::string err;
  auto p = kws::StreamPipeline::create(src, *r.session, *r.detector, &err);
  ASSERT_TRUE(p) << err;
  Recorder rec(r.model->hparams().n_classes);
  EXPECT_EQ(p->run(kws::StreamOptions(), rec), kws::StreamEnd::source_failed);
  EXPECT_EQ(src.error(), "unplugged");
  EXPECT_EQ(p->stats().n_samples, 10000);
  EXPECT_EQ(p->stats().n_chunks, 10000 / r.model->hparams().chunk_samples());  // no silence added
}

TEST(StreamPipeline, RefusesFormatsItCannotStream) {
  Rig r = make_rig();
  MemorySource src(std::vector<float>(30), 3, 16000.0, 10);
  std::string err;
  EXPECT_FALSE(kws::StreamPipeline::create(src, *r.session, *r.detector, &err));
  EXPECT_NE(err.find("3 channels"), std::string::npos) << err;
}

TEST(StreamPipeline, AllocatesNothingWhileStreaming) {
  const std::vector<float> x = commands();
  for (double rate : {16000.0, 48000.0}) {
    Rig r = make_rig();
    // warm-up: the session's first chunk (first touch, thread start-up)
    const int64_t cs = r.model->hparams().chunk_samples();
    ASSERT_EQ(r.session->push_all(x.data(), cs, [](const mega::ChunkResult&) {}), mega::Status::ok);
    r.session->reset();
    MemorySource src(x, 1, rate, 700);
    std::string err;
    auto p = kws::StreamPipeline::create(src, *r.session, *r.detector, &err);
    ASSERT_TRUE(p) << err;
    Recorder rec(r.model->hparams().n_classes);
    kws::StreamEnd end = kws::StreamEnd::stopped;
    EXPECT_EQ(mega_alloc::allocations_in([&] { end = p->run(kws::StreamOptions(), rec); }), 0) << "at " << rate << " Hz";
    EXPECT_EQ(end, kws::StreamEnd::ended);
    EXPECT_GT(p->stats().n_chunks, 10);
  }
}


// Interleaved frames as a float WAV file.
bool write_float_wav(const std::string& path, const std::vector<float>& x, int rate, int channels) {
  SF_INFO sfi = {};
  sfi.samplerate = rate;
  sfi.channels = channels;
  sfi.format = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  SNDFILE* f = sf_open(path.c_str(), SFM_WRITE, &sfi);
  EXPECT_TRUE(f) << sf_strerror(nullptr);
  if (!f) return false;
  const sf_count_t n = sf_count_t(x.size()) / channels;
  const bool ok = sf_writef_float(f, x.data(), n) == n;
  sf_close(f);
  return ok;
}

// scan's source: a file at another rate comes out at the model's rate whole,
// its resampler's tail flushed (it lost 94 samples of 8 kHz commands.wav, 47 ms of a 3 s file at 1 kHz).
TEST(FileSource, DeliversTheWholeFileAtEveryRate) {
  char dir[] = "/tmp/kws_file_rates.XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  for (int rate : {8000, 1000, 44100, 22050}) {
    const std::string path = std::string(dir) + "/r" + std::to_string(rate) + ".wav";
    const std::vector<float> x = odd_length_tone(rate);
    const int64_t n_frames = int64_t(x.size());
    ASSERT_TRUE(write_float_wav(path, x, rate, 1));
    std::string err;
    auto src = kws::FileSource::open(path, &err);
    ASSERT_TRUE(src) << err;
    EXPECT_NEAR(streamed_samples(*src), double(n_frames) * 16000.0 / rate, 1.0) << rate << " Hz";
    unlink(path.c_str());
  }
  rmdir(dir);
}

// scan reads a file at its own rate and the stream pipeline resamples it;
// classify's whole clip (read_audio_file) goes through the same resampler:
// the same chunks, logits and detections either way.
TEST(FileSource, ScanHearsAResampledFileAsClassifyDoes) {
  const std::vector<float> x = commands();
  std::vector<float> x44(size_t(double(x.size()) * 44100.0 / 16000.0) + 256), stereo;
  SRC_DATA d{};
  d.data_in = x.data();
  d.input_frames = long(x.size());
  d.data_out = x44.data();
  d.output_frames = long(x44.size());
  d.src_ratio = 44100.0 / 16000.0;
  ASSERT_EQ(src_simple(&d, SRC_SINC_MEDIUM_QUALITY, 1), 0);
  for (long i = 0; i < d.output_frames_gen; ++i) {
    stereo.push_back(x44[size_t(i)]);
    stereo.push_back(-0.5f * x44[size_t(i)]);
  }
  char path[] = "/tmp/kws_scan_44k.XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_TRUE(write_float_wav(path, stereo, 44100, 2));

  std::string err;
  auto src = kws::FileSource::open(path, &err);
  ASSERT_TRUE(src) << err;
  EXPECT_EQ(src->format().rate, 44100.0);  // the file's own rate: the pipeline resamples
  EXPECT_EQ(src->format().channels, 1);
  Rig r = make_rig();
  auto p = kws::StreamPipeline::create(*src, *r.session, *r.detector, &err);
  ASSERT_TRUE(p) << err;
  EXPECT_TRUE(p->resampling());
  Recorder rec(r.model->hparams().n_classes);
  EXPECT_EQ(p->run(kws::StreamOptions(), rec), kws::StreamEnd::ended);

  std::vector<float> clip;
  kws::AudioInfo info;
  ASSERT_TRUE(kws::read_audio_file(path, 16000, 60.0, &clip, &info, &err)) << err;
  unlink(path);
  EXPECT_TRUE(info.resampled);
  EXPECT_EQ(info.sample_rate, 44100);
  EXPECT_EQ(p->stats().n_samples, int64_t(clip.size()));
  const Recorder want = direct(clip);
  EXPECT_EQ(rec.chunk_ends, want.chunk_ends);
  EXPECT_EQ(rec.logits, want.logits);
  EXPECT_EQ(rec.detections, want.detections);
  EXPECT_EQ(labels(*r.model, rec), (std::vector<std::string>{"yes", "stop", "go", "left", "no"}));
}

// scan's path with the resampling moved out of the reader: a file at another
// rate streams without allocating once its first block has been read (the
// reader's buffers sized by it), as the microphone's path does.
TEST(FileSource, AResampledFileStreamsWithoutAllocating) {
  char path[] = "/tmp/kws_alloc_44k.XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::vector<float> x = odd_length_tone(44100);
  for (int i = 0; i < 3; ++i) x.insert(x.end(), x.begin(), x.begin() + 44100 * 3);  // 12 s: many reads
  ASSERT_TRUE(write_float_wav(path, x, 44100, 1));
  Rig r = make_rig();
  const int64_t cs = r.model->hparams().chunk_samples();
  ASSERT_EQ(r.session->push_all(x.data(), cs, [](const mega::ChunkResult&) {}), mega::Status::ok);  // warm-up
  r.session->reset();
  std::string err;
  auto src = kws::FileSource::open(path, &err);
  ASSERT_TRUE(src) << err;
  auto p = kws::StreamPipeline::create(*src, *r.session, *r.detector, &err);
  ASSERT_TRUE(p) << err;
  ASSERT_EQ(src->poll(), kws::SourceState::running);  // the first block
  Recorder rec(r.model->hparams().n_classes);
  kws::StreamEnd end = kws::StreamEnd::stopped;
  EXPECT_EQ(mega_alloc::allocations_in([&] { end = p->run(kws::StreamOptions(), rec); }), 0);
  unlink(path);
  EXPECT_EQ(end, kws::StreamEnd::ended);
  EXPECT_GT(p->stats().n_chunks, 40);
}

}  // namespace
