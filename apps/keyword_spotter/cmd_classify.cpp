// SPDX-License-Identifier: Apache-2.0
// classify: audio clips through the runtime, one result line per file (with
// --json a "classification" object, or an "error" one, each naming its file).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "audio_file.h"
#include "cli_output.h"
#include "commands.h"
#include "model_setup.h"

namespace kws {

namespace {

constexpr double kMaxClipSeconds = 600.0;
constexpr double kMaxBidirectionalClipSeconds = 30.0;

void softmax(const float* logits, int n, std::vector<float>* out) {
  out->resize(size_t(n));
  const float mx = *std::max_element(logits, logits + n);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::exp(double(logits[i] - mx));
  for (int i = 0; i < n; ++i) (*out)[size_t(i)] = float(std::exp(double(logits[i] - mx)) / sum);
}

// How a window competes for "best": its best keyword probability (labels
// starting with '_' do not count unless the model has nothing else).
float window_score(const mega::Model& m, const float* logits, std::vector<float>* probs) {
  softmax(logits, m.hparams().n_classes, probs);
  float best = -1.0f;
  for (size_t i = 0; i < probs->size(); ++i) {
    if (m.labels()[i][0] != '_') best = std::max(best, (*probs)[i]);
  }
  return best >= 0.0f ? best : *std::max_element(probs->begin(), probs->end());
}

struct ClipResult {
  std::vector<float> logits;
  double window_start_s = 0.0;
  bool padded = false;  // set by the caller, from the file's own duration
};

// A clip shorter than a window is zero-padded and classified offline (exactly
// the official model). A longer one, or any clip with --block-size, goes
// through the streaming session and the best window wins; bidirectional
// models slide fresh windows instead.
mega::Status classify_samples(mega::Engine& s, const Params& p, std::vector<float> clip, ClipResult* r) {
  const mega::Model& m = s.model();
  const mega::HParams& hp = m.hparams();
  const int64_t window = hp.window_samples(), chunk = hp.chunk_samples();
  r->logits.assign(size_t(hp.n_classes), 0.0f);
  std::vector<float> probs;
  if (!m.streamable()) {
    if (int64_t(clip.size()) <= window) return s.classify_clip(clip.data(), int64_t(clip.size()), r->logits.data());
    const int64_t hop = std::max(chunk, window / 4);
    std::vector<float> lg(r->logits.size());
    float best = -1.0f;
    for (int64_t start = 0;; start += hop) {
      start = std::min(start, int64_t(clip.size()) - window);
      const mega::Status st = s.classify_clip(clip.data() + start, window, lg.data());
      if (st != mega::Status::ok) return st;
      const float sc = window_score(m, lg.data(), &probs);
      if (sc > best) {
        best = sc;
        r->logits = lg;
        r->window_start_s = double(start) / hp.sample_rate;
      }
      if (start + window >= int64_t(clip.size())) break;
    }
    return mega::Status::ok;
  }
  if (p.block_size == 0 && int64_t(clip.size()) <= window) {
    return s.classify_clip(clip.data(), int64_t(clip.size()), r->logits.data());
  }
  // streaming: pad to whole chunks (and a whole window); windows end on chunk boundaries
  const int64_t padded = std::max(window, (int64_t(clip.size()) + chunk - 1) / chunk * chunk);
  clip.resize(size_t(padded), 0.0f);
  const int64_t block = p.block_size > 0 ? p.block_size : padded;
  s.reset();
  float best = -1.0f;
  for (int64_t off = 0; off < padded; off += block) {
    const mega::Status st = s.push_all(clip.data() + off, std::min(block, padded - off), [&](const mega::ChunkResult& c) {
      if (c.n_chunks_pooled < hp.window_chunks) return;
      const float sc = window_score(m, c.logits, &probs);
      if (sc > best) {
        best = sc;
        r->logits.assign(c.logits, c.logits + hp.n_classes);
        r->window_start_s = double(c.end_sample - window) / hp.sample_rate;
      }
    });
    if (st != mega::Status::ok) return st;
  }
  s.reset();
  return mega::Status::ok;
}

}  // namespace

int cmd_classify(const Params& p) {
  auto m = load_model(p);
  if (!m) return kExitModel;
  const mega::HParams& hp = m->hparams();
  if (p.block_size > 0 && !m->streamable()) {
    std::fprintf(stderr, "keyword_spotter: --block-size needs a streaming (unidirectional) model; this one is "
                         "bidirectional and classifies whole clips only\n");
    return kExitUsage;
  }
  auto s = make_session(m, p, hp.window_samples());
  if (!s) return kExitModel;
  const double max_seconds = m->streamable() ? kMaxClipSeconds : kMaxBidirectionalClipSeconds;
  const bool progress = p.files.size() > 1 && isatty(STDERR_FILENO);
  int failures = 0;
  std::vector<float> audio, probs;
  for (size_t fi = 0; fi < p.files.size(); ++fi) {
    const std::string& path = p.files[fi];
    if (progress) std::fprintf(stderr, "\r\033[K[%zu/%zu] %s", fi + 1, p.files.size(), path.c_str());
    AudioInfo ai;
    std::string err;
    ClipResult r;
    const int64_t clipped_before = s->stats().n_clamped_samples;  // counted since the session was made
    if (read_audio_file(path, hp.sample_rate, max_seconds, &audio, &ai, &err)) {
      const mega::Status st = classify_samples(*s, p, audio, &r);
      if (st != mega::Status::ok) err = mega::status_name(st);
    }
    // as scan says it: the reader refuses NaN/Inf; samples beyond full scale are clipped by the session
    const long long clipped = static_cast<long long>(s->stats().n_clamped_samples - clipped_before);
    if (err.empty() && clipped > 0) {
      if (progress) std::fprintf(stderr, "\r\033[K");
      std::fprintf(stderr, "keyword_spotter: %s: %lld samples beyond full scale clipped\n", path.c_str(), clipped);
    }
    if (progress) std::fprintf(stderr, "\r\033[K");
    if (!err.empty()) {
      ++failures;
      if (p.json) {
        print_file_error(path, err);
      } else {
        std::fprintf(stderr, "keyword_spotter: %s: %s\n", path.c_str(), err.c_str());
      }
      if (!stdout_ok()) break;  // the results are lost: the rest would be too (reported at exit)
      continue;
    }
    // "padded" describes the file, not the resampler's output (which can come
    // out a few samples short of duration * rate)
    r.padded = ai.frames * hp.sample_rate < hp.window_samples() * ai.sample_rate;
    softmax(r.logits.data(), hp.n_classes, &probs);
    const size_t best = size_t(std::max_element(probs.begin(), probs.end()) - probs.begin());
    const std::string& label = m->labels()[best];
    const double duration = double(ai.frames) / ai.sample_rate;
    if (p.json) {
      JsonLine().str("type", "classification").file(path).str("label", label).fixed("score", probs[best], 6)
          .nums("logits", r.logits).fixed("duration_s", duration, 3).fixed("window_start_s", r.window_start_s, 3)
          .boolean("padded", r.padded).integer("sample_rate", ai.sample_rate).end();
    } else {
      std::printf("%s\t%s\t%.3f", path.c_str(), label.c_str(), probs[best]);
      if (r.padded) std::printf("\t(padded from %.3f s)", duration);
      if (r.window_start_s > 0.0) std::printf("\t(window at %.3f s)", r.window_start_s);
      std::printf("\n");
    }
    if (!stdout_ok()) break;
  }
  return failures ? kExitFailed : kExitOk;
}

}  // namespace kws
