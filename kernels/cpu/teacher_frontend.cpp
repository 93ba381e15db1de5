// SPDX-License-Identifier: Apache-2.0
// The teacher's front end (teacher_frontend.h): the embedding graph's layer
// table, its network over one window, the streaming runner and the offline
// whole-clip path.
#include "cpu/teacher_frontend.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace mega::teacher {

namespace {
constexpr int32_t kLast = kConvLayers - 1;

template <typename T>
int64_t bytes_of(const std::vector<T>& v) {
  return int64_t(v.capacity() * sizeof(T));
}

// Steps whose frames are complete after s samples.
int64_t steps_after(int64_t s) { return s < kStepSpan ? 0 : (s - (kStepSpan - kStepSamples)) / kStepSamples; }
}  // namespace

Conv2dParams conv_params(const TeacherWeights& w, int32_t i, int32_t h, int32_t width) {
  const ConvSpec& s = kConvSpecs[i];
  Conv2dParams p;
  p.c_in = s.c_in;
  p.h = h;
  p.w = width;
  p.weight = w.conv_weight[i];
  p.bias = w.conv_bias[i];
  p.c_out = s.c_out;
  p.kh = s.kh;
  p.kw = s.kw;
  p.pad_left = p.pad_right = s.pad_w;
  return p;
}

bool PackedConvs::init(const TeacherWeights& w) {
  int64_t n = 0;
  for (int32_t i = 0; i < kConvLayers; ++i) {
    offset[i] = n;
    n += conv2d_packed_floats(conv_params(w, i, 1, 1));
  }
  try {
    data.assign(size_t(n), 0.0f);
  } catch (const std::bad_alloc&) {
    return false;
  }
  for (int32_t i = 0; i < kConvLayers; ++i) conv2d_pack(conv_params(w, i, 1, 1), data.data() + offset[i]);
  return true;
}

void conv_apply(KernelImpl impl, const Conv2dParams& p, const ConvEpilogue& e, const float* packed, float* scratch) {
  if (impl == KernelImpl::optimized) return conv2d_fast(p, e, packed, scratch);
  conv2d_ref(p);
  if (!e.active) return;
  const int64_t n = int64_t(p.c_out) * conv2d_out_h(p) * conv2d_out_w(p);
  leaky_relu_ref(p.y, e.alpha, p.y, n);
  max_scalar_ref(p.y, e.floor, p.y, n);
}

void pool_apply(KernelImpl impl, const MaxPoolParams& p) {
  impl == KernelImpl::optimized ? maxpool_fast(p) : maxpool_ref(p);
}


const char* teacher_weights_missing(const TeacherWeights& w) {
  if (!w.stft_real) return "stft_real";
  if (!w.stft_imag) return "stft_imag";
  if (!w.mel) return "mel";
  for (int32_t i = 0; i < kConvLayers; ++i) {
    if (!w.conv_weight[i]) return "a convolution's weight";
    if (i != kLast && !w.conv_bias[i]) return "a convolution's bias";
  }
  return nullptr;
}

bool TeacherNet::init(const TeacherWeights& w, KernelImpl impl, int32_t max_frames, bool windows) {
  w_ = &w;
  impl_ = impl;
  max_frames_ = max_frames;
  int64_t act = int64_t(kWindowFrames) * kMel, scratch = 0;
  int32_t h = kWindowFrames, width = kMel;
  for (int32_t i = 0; i < kConvLayers; ++i) {  // the largest activation and scratch over the layers
    const Conv2dParams p = conv_params(w, i, h, width);
    h = conv2d_out_h(p);
    width = conv2d_out_w(p);
    act = std::max(act, int64_t(p.c_out) * h * width);
    scratch = std::max(scratch, conv2d_scratch_floats(p));
    if (kConvSpecs[i].pool_h) {
      h /= kConvSpecs[i].pool_h;
      width /= kConvSpecs[i].pool_w;
    }
  }
  const bool fast = impl == KernelImpl::optimized;
  try {
    if (windows) {
      act_.assign(size_t(act), 0.0f);
      next_.assign(size_t(act), 0.0f);
      scratch_.assign(fast ? size_t(scratch) : 0, 0.0f);
    }
    if (fast) {
      stft_.assign(size_t(kFft) * 2 * kBins, 0.0);
      mel_.assign(w.mel, w.mel + size_t(kBins) * kMel);
      frames_.assign(size_t(max_frames) * kFft, 0.0);
      spectrum_.assign(size_t(max_frames) * 2 * kBins, 0.0);
      mel_pack_stft(w.stft_real, w.stft_imag, stft_.data());
    }
  } catch (const std::bad_alloc&) {
    return false;
  }
  return !(windows && fast) || packed_.init(w);
}

void TeacherNet::mel_db(const float* samples, int32_t n_frames, double* db) {
  MelParams p;
  p.samples = samples;
  p.n_frames = n_frames;
  p.stft_real = w_->stft_real;
  p.stft_imag = w_->stft_imag;
  p.mel = w_->mel;
  p.clip_min = w_->clip_min;
  p.db = db;
  if (impl_ == KernelImpl::reference) return mel_db_ref(p);
  mel_db_fast(p, MelFastParams{stft_.data(), mel_.data(), frames_.data(), spectrum_.data()});
}

// act_ (c_in x h x w) -> act_ (c_out x h' x w'), pooled if the layer says so.
// act_ (c_in x h x w) -> act_ (c_out x h' x w'), pooled if the layer says so.
void TeacherNet::conv_layer(int32_t i, int32_t* h, int32_t* w) {
  const ConvSpec& s = kConvSpecs[i];
  Conv2dParams p = conv_params(*w_, i, *h, *w);
  p.x = act_.data();
  p.y = next_.data();
  *h = conv2d_out_h(p);
  *w = conv2d_out_w(p);
  conv_apply(impl_, p, ConvEpilogue{i != kLast, w_->leaky_alpha, w_->max_floor}, packed_.layer(i), scratch_.data());
  if (!s.pool_h) return act_.swap(next_);
  MaxPoolParams m{next_.data(), s.c_out, *h, *w, s.pool_h, s.pool_w, s.pool_h, s.pool_w, act_.data()};
  *h = maxpool_out_h(m);
  *w = maxpool_out_w(m);
  pool_apply(impl_, m);
}

void TeacherNet::embed(const float* window, float* out) {
  std::copy(window, window + kWindowFrames * kMel, act_.data());  // (1 x 76 x 32): the graph's NCHW
  int32_t h = kWindowFrames, w = kMel;
  for (int32_t i = 0; i < kConvLayers; ++i) conv_layer(i, &h, &w);
  std::copy(act_.data(), act_.data() + kEmbedding, out);  // (96 x 1 x 1)
}

Status TeacherFrontEnd::create(const TeacherWeights& w, KernelImpl impl, std::unique_ptr<TeacherFrontEnd>* out,
                               const char** error) {
  static const char* const kOom = "teacher front end: out of memory";
  if (!out) return Status::invalid_argument;
  out->reset();
  if (const char* missing = teacher_weights_missing(w)) {
    if (error) *error = missing;
    return Status::invalid_argument;
  }
  std::unique_ptr<TeacherFrontEnd> f(new (std::nothrow) TeacherFrontEnd());
  bool ok = f && f->net_.init(w, impl, kStepFrames, false) && f->embedder_.init(w, impl);
  if (ok) {
    try {
      f->pending_.assign(kStepSpan, 0.0f);
      f->db_.assign(size_t(kStepFrames) * kMel, 0.0);
      f->frames_.assign(size_t(kStepFrames) * kMel, 0.0f);
    } catch (const std::bad_alloc&) {
      ok = false;
    }
  }
  if (!ok) {
    if (error) *error = kOom;
    return Status::out_of_memory;
  }
  f->top_db_ = w.top_db;
  *out = std::move(f);
  return Status::ok;
}

void TeacherFrontEnd::reset() {
  n_pending_ = 0;
  embedder_.reset();
  samples_seen_ = 0;
  error_ = "";
}

int64_t TeacherFrontEnd::embeddings_for(int64_t n) const {
  const auto made = [](int64_t s) { return std::max<int64_t>(0, steps_after(s) - (kWindowSteps - 1)); };
  return n <= 0 ? 0 : made(samples_seen_ + n) - made(samples_seen_);
}

// pending_ holds a whole step: its frames, floored and scaled, go through the embedding graph's layers.
void TeacherFrontEnd::step(float* out, int64_t* n_out) {
  net_.mel_db(pending_.data(), kStepFrames, db_.data());
  mel_floor_scale(db_.data(), kStepFrames, top_db_, frames_.data());
  constexpr int32_t keep = kStepSpan - kStepSamples;  // the next step's first frames start here
  std::memmove(pending_.data(), pending_.data() + kStepSamples, sizeof(float) * keep);
  n_pending_ = keep;
  if (embedder_.push(frames_.data(), out + *n_out * kEmbedding)) ++*n_out;
}

Status TeacherFrontEnd::push(const float* samples, int64_t n, float* out, int64_t capacity, int64_t* n_out) {
  if (n_out) *n_out = 0;
  if (n < 0 || (n > 0 && !samples) || !n_out) {
    error_ = "teacher front end: push needs samples (n >= 0) and n_out";
    return Status::invalid_argument;
  }
  const int64_t coming = embeddings_for(n);
  if (coming > 0 && (!out || capacity < coming)) {
    error_ = "teacher front end: out has room for fewer embeddings than this push gives (embeddings_for)";
    return Status::invalid_argument;
  }
  int64_t used = 0;
  while (used < n) {
    const int64_t take = std::min<int64_t>(n - used, kStepSpan - n_pending_);
    std::copy(samples + used, samples + used + take, pending_.data() + n_pending_);
    n_pending_ += int32_t(take);
    used += take;
    if (n_pending_ == kStepSpan) step(out, n_out);
  }
  samples_seen_ += n;
  return Status::ok;
}

int64_t offline_embeddings(int64_t n, int32_t floor_frames) {
  if (floor_frames == kStepFrames) return std::max<int64_t>(0, steps_after(n) - (kWindowSteps - 1));
  const int64_t frames = n < kFft ? 0 : (n - kFft) / kHop + 1;
  return frames < kWindowFrames ? 0 : (frames - kWindowFrames) / kStepFrames + 1;
}

Status embed_offline(const TeacherWeights& w, KernelImpl impl, const float* audio, int64_t n, int32_t floor_frames,
                     float* out, int64_t capacity, int64_t* n_out) {
  if (!n_out || (floor_frames != 0 && floor_frames != kStepFrames) || n < 0 || (n > 0 && !audio) ||
      teacher_weights_missing(w)) {
    return Status::invalid_argument;
  }
  *n_out = 0;
  const int64_t n_emb = offline_embeddings(n, floor_frames);
  if (n_emb == 0) return Status::ok;
  if (!out || capacity < n_emb) return Status::invalid_argument;
  const int64_t frames = floor_frames ? steps_after(n) * kStepFrames : (n - kFft) / kHop + 1;
  constexpr int32_t block = 64;
  TeacherNet net;
  std::vector<double> db;
  std::vector<float> mel;
  try {
    db.resize(size_t(frames) * kMel);
    mel.resize(db.size());
  } catch (const std::bad_alloc&) {
    return Status::out_of_memory;
  }
  if (!net.init(w, impl, block, true)) return Status::out_of_memory;
  for (int64_t f = 0; f < frames; f += block) {
    net.mel_db(audio + f * kHop, int32_t(std::min<int64_t>(block, frames - f)), db.data() + f * kMel);
  }
  const int64_t group = floor_frames ? floor_frames : frames;
  for (int64_t f = 0; f < frames; f += group) {
    mel_floor_scale(db.data() + f * kMel, group, w.top_db, mel.data() + f * kMel);
  }
  for (int64_t j = 0; j < n_emb; ++j) net.embed(mel.data() + j * kStepFrames * kMel, out + j * kEmbedding);
  *n_out = n_emb;
  return Status::ok;
}

int64_t TeacherNet::memory_bytes() const {
  return bytes_of(act_) + bytes_of(next_) + bytes_of(scratch_) + bytes_of(packed_.data) + bytes_of(stft_) +
         bytes_of(mel_) + bytes_of(frames_) + bytes_of(spectrum_);
}

int64_t TeacherSteps::memory_bytes() const {
  int64_t n = bytes_of(rows_) + bytes_of(held_) + bytes_of(scratch_) + bytes_of(packed_.data);
  for (const Layer& l : layers_) n += bytes_of(l.in_tail) + bytes_of(l.pool_tail);
  return n;
}

int64_t TeacherFrontEnd::memory_bytes() const {
  return int64_t(sizeof(*this)) + net_.memory_bytes() + embedder_.memory_bytes() + bytes_of(pending_) +
         bytes_of(db_) + bytes_of(frames_);
}

}  // namespace mega::teacher
