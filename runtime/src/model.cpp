// SPDX-License-Identifier: Apache-2.0
// Loading a .mega file: map it, verify it, check every hyper-parameter and
// every tensor against them, derive what the kernels need. Anything wrong is
// refused here with a message naming it; sessions then run without checks.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <map>

#include "mega/detection_limits.hpp"
#include "mega_model_generated.h"
#include "mega_format.h"
#include "model_data.h"
#include "model_load.h"

namespace mega {

constexpr size_t kMinFileBytes = 16 + kTrailerBytes;

const char* status_name(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::invalid_argument: return "invalid argument";
    case Status::io_error: return "i/o error";
    case Status::bad_model: return "bad model file";
    case Status::unsupported_model: return "unsupported model";
    case Status::not_streamable: return "model cannot stream";
    case Status::too_long: return "clip too long";
    case Status::out_of_memory: return "out of memory";
    case Status::self_test_failed: return "self-test failed";
    case Status::no_device: return "no such compute device";
    case Status::device_error: return "compute device error";
    case Status::busy: return "busy";
  }
  return "unknown status";
}

namespace {

uint32_t crc32(const uint8_t* p, size_t n) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? kCrc32Polynomial ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t read_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

bool check_range(LoadError* err, const char* name, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    return err->set(Status::bad_model, std::string("hyper-parameter ") + name + " = " + std::to_string(v) +
                                           " is out of range [" + std::to_string(lo) + ", " +
                                           std::to_string(hi) + "]");
  }
  return true;
}

// One stored float16 peak (schema 5): a magnitude (infinity allowed: the
// converter saw NaN or Inf) at a layer of the model.
bool read_fp16_peak(const fb::Fp16Peak* p, const char* field, int32_t n_layers, Fp16Peak* out, LoadError* err) {
  out->value = p->value();
  out->layer = p->layer();
  if (p->tensor()) out->tensor = p->tensor()->str();
  if (!(out->value >= 0.0f)) {
    return err->set(Status::bad_model, std::string("fp16_range.") + field + ".value is " +
                                           std::to_string(out->value) + "; a peak is >= 0");
  }
  if (out->layer < -1 || out->layer >= n_layers) {
    return err->set(Status::bad_model, std::string("fp16_range.") + field + ".layer is " +
                                           std::to_string(out->layer) + " of a model with " +
                                           std::to_string(n_layers) + " layers");
  }
  return true;
}

bool read_hparams(const fb::HParams* h, HParams* hp, LoadError* err) {
  hp->embed_dim = h->embed_dim();
  hp->hidden_dim = h->hidden_dim();
  hp->ffn_hidden_dim = h->ffn_hidden_dim();
  hp->z_dim = h->z_dim();
  hp->n_dim = h->n_dim();
  hp->n_layers = h->n_layers();
  hp->chunk_size = h->chunk_size();
  hp->truncation = h->truncation();
  hp->norm_eps = h->norm_eps();
  hp->prenorm = h->prenorm();
  hp->classifier_layers = h->classifier_layers();
  hp->classifier_dim = h->classifier_dim();
  hp->n_classes = h->n_classes();
  hp->patch_kernel = h->patch_kernel();
  hp->patch_stride = h->patch_stride();
  hp->patch_log_eps = h->patch_log_eps();
  hp->patch_norm_decay = h->patch_norm_decay();
  hp->patch_bins = h->patch_bins();
  hp->patch_bands = h->patch_bands();
  hp->window_chunks = h->window_chunks();
  constexpr int64_t kMaxDim = 1 << 14;
  bool ok = check_range(err, "embed_dim", hp->embed_dim, 1, kMaxDim) &&
            check_range(err, "hidden_dim", hp->hidden_dim, 1, kMaxDim) &&
            check_range(err, "ffn_hidden_dim", hp->ffn_hidden_dim, 0, kMaxDim) &&
            check_range(err, "z_dim", hp->z_dim, 1, kMaxDim) && check_range(err, "n_dim", hp->n_dim, 1, 1024) &&
            check_range(err, "n_layers", hp->n_layers, 1, 256) &&
            check_range(err, "chunk_size", hp->chunk_size, 1, 1 << 14) &&
            check_range(err, "truncation", hp->truncation, 0, 1 << 20) &&
            check_range(err, "classifier_layers", hp->classifier_layers, 1, 64) &&
            check_range(err, "classifier_dim", hp->classifier_dim, 1, kMaxDim) &&
            check_range(err, "n_classes", hp->n_classes, 1, 1 << 12) &&
            check_range(err, "patch_stride", hp->patch_stride, 1, 1 << 14) &&
            check_range(err, "patch_kernel", hp->patch_kernel, hp->patch_stride, 1 << 14) &&
            check_range(err, "window_chunks", hp->window_chunks, 1, 1 << 12) &&
            check_range(err, "window samples", hp->window_samples(), 1, int64_t(1) << 28);
  if (!ok) return false;
  if (!(hp->norm_eps > 0.0f && std::isfinite(hp->norm_eps))) {
    return err->set(Status::bad_model, "hyper-parameter norm_eps must be a positive number");
  }
  const int32_t dir = h->ema_direction(), attn = h->attention_fn(), norm = h->norm_type();
  const int32_t act = h->activation(), cact = h->classifier_activation(), pool = h->pooling();
  if (dir < 0 || dir > 1) return err->set(Status::unsupported_model, "unknown ema_direction " + std::to_string(dir));
  if (attn < 0 || attn > 2) return err->set(Status::unsupported_model, "unknown attention_fn " + std::to_string(attn));
  if (norm < 0 || norm > 3) return err->set(Status::unsupported_model, "unknown norm_type " + std::to_string(norm));
  if (act < 0 || act > 4) return err->set(Status::unsupported_model, "unknown activation " + std::to_string(act));
  if (cact < 0 || cact > 4) {
    return err->set(Status::unsupported_model, "unknown classifier_activation " + std::to_string(cact));
  }
  if (pool != 0) return err->set(Status::unsupported_model, "unknown pooling " + std::to_string(pool));
  const int32_t feat = h->patch_features();
  if (feat < 0 || feat > 3) return err->set(Status::unsupported_model, "unknown patch_features " + std::to_string(feat));
  hp->patch_features = PatchFeatures(feat);
  if (hp->patch_features != PatchFeatures::linear &&
      !(hp->patch_log_eps > 0.0f && std::isfinite(hp->patch_log_eps))) {
    return err->set(Status::bad_model, "hyper-parameter patch_log_eps must be a positive number");
  }
  if (hp->patch_features == PatchFeatures::log_mel &&
      !(check_range(err, "patch_bins", hp->patch_bins, 1, 1 << 14) &&
        check_range(err, "patch_bands", hp->patch_bands, 1, 1 << 12))) {
    return false;
  }
  const int32_t pnorm = h->patch_norm();
  if (pnorm < 0 || pnorm > 1) return err->set(Status::unsupported_model, "unknown patch_norm " + std::to_string(pnorm));
  hp->patch_norm = PatchNorm(pnorm);
  if (hp->patch_norm == PatchNorm::running_mean) {
    if (hp->patch_features != PatchFeatures::log_power) {
      return err->set(Status::bad_model, "patch_norm running_mean needs log_power patch features");
    }
    if (!(hp->patch_norm_decay > 0.0f && hp->patch_norm_decay < 1.0f)) {
      return err->set(Status::bad_model, "hyper-parameter patch_norm_decay must be between 0 and 1");
    }
  }
  hp->ema_direction = EmaDirection(dir);
  hp->attention_fn = AttentionFn(attn);
  hp->norm_type = NormType(norm);
  hp->activation = Activation(act);
  hp->classifier_activation = Activation(cact);
  return true;
}

// Labels: one per class, none empty, none repeated (a repeated label would
// report every detection of the second under the first's name).
bool read_labels(const fb::Model* m, const HParams& hp, ModelInfo* info, LoadError* err) {
  const auto* labels = m->labels();
  if (int64_t(labels->size()) != hp.n_classes) {
    return err->set(Status::bad_model, "file has " + std::to_string(labels->size()) + " labels for " +
                                           std::to_string(hp.n_classes) + " classes");
  }
  std::map<std::string, flatbuffers::uoffset_t> first;
  for (flatbuffers::uoffset_t i = 0; i < labels->size(); ++i) {
    const auto* s = labels->Get(i);
    if (!s || s->size() == 0) return err->set(Status::bad_model, "label " + std::to_string(i) + " is empty");
    const auto seen = first.emplace(s->str(), i);
    if (!seen.second) {
      return err->set(Status::bad_model, "label '" + s->str() + "' appears twice (labels " +
                                             std::to_string(seen.first->second) + " and " + std::to_string(i) + ")");
    }
    info->labels.push_back(s->str());
  }
  return true;
}

// The stored detection defaults, in the ranges Detector::create takes: a
// stored threshold of 0 would load, then fail every scan that gives no option.
bool read_detection(const fb::Detection* d, const HParams& hp, ModelInfo* info, LoadError* err) {
  if (!d) return true;
  if (d->thresholds() && d->thresholds()->size() > 0) {
    if (int64_t(d->thresholds()->size()) != hp.n_classes) {
      return err->set(Status::bad_model, "detection thresholds: " + std::to_string(d->thresholds()->size()) +
                                             " values for " + std::to_string(hp.n_classes) + " labels");
    }
    for (flatbuffers::uoffset_t i = 0; i < d->thresholds()->size(); ++i) {
      const float t = d->thresholds()->Get(i);
      if (!threshold_in_range(t)) {
        char value[32];
        std::snprintf(value, sizeof value, "%g", double(t));
        return err->set(Status::bad_model, "detection threshold of label '" + info->labels[i] + "' is " + value +
                                               "; thresholds must be in (0, 1]");
      }
      info->detection.thresholds.push_back(t);
    }
  }
  info->detection.smoothing_hops = d->smoothing_hops();
  info->detection.refractory_ms = d->refractory_ms();
  return check_range(err, "detection smoothing_hops", d->smoothing_hops(), kMinSmoothingHops, kMaxSmoothingHops) &&
         check_range(err, "detection refractory_ms", d->refractory_ms(), kMinRefractoryMs, kMaxRefractoryMs);
}

// The container: size, identifier, end marker, checksum, FlatBuffers structure.
bool check_container(const uint8_t* buf, size_t size, LoadError* err) {
  if (size < kMinFileBytes) {
    return err->set(Status::bad_model, "file is too small to be a model (" + std::to_string(size) + " bytes)");
  }
  if (!fb::ModelBufferHasIdentifier(buf)) {
    char id[5] = {0};
    std::memcpy(id, buf + 4, 4);
    for (int i = 0; i < 4; ++i) id[i] = (id[i] >= 32 && id[i] < 127) ? id[i] : '?';
    return err->set(Status::bad_model,
                    std::string("not a .mega model file (identifier '") + id + "', expected 'MEGA')");
  }
  const uint8_t* trailer = buf + size - kTrailerBytes;
  if (std::memcmp(trailer, kTrailerMagic, sizeof kTrailerMagic) != 0) {
    return err->set(Status::bad_model, "file is truncated or incomplete (no end marker)");
  }
  if (read_u32(trailer + kTrailerLengthOffset) != size) {
    return err->set(Status::bad_model, "file is " + std::to_string(size) + " bytes but its end marker says " +
                                           std::to_string(read_u32(trailer + kTrailerLengthOffset)) + " (truncated or altered)");
  }
  size -= kTrailerBytes;
  const uint32_t stored = read_u32(trailer + kTrailerCrcOffset), actual = crc32(buf, size);
  if (stored != actual) {
    char msg[128];
    std::snprintf(msg, sizeof msg, "file is corrupted: checksum mismatch (stored %08x, computed %08x)", stored,
                  actual);
    return err->set(Status::bad_model, msg);
  }
  flatbuffers::Verifier verifier(buf, size, 64, 1000000);
  if (!fb::VerifyModelBuffer(verifier)) {
    return err->set(Status::bad_model, "file structure is corrupt or truncated (FlatBuffers verification failed)");
  }
  return true;
}

// The teacher's front end reads fixed windows of int16-scaled audio at 16 kHz
// and carries its own state from chunk to chunk: only causal streams.
bool check_teacher_front_end(const ModelInfo& info, LoadError* err) {
  const HParams& hp = info.hparams;
  if (hp.patch_features != PatchFeatures::teacher_embedding) return true;
  const auto bad = [&](const std::string& what) {
    return err->set(Status::bad_model, "patch_features teacher_embedding needs " + what);
  };
  if (hp.patch_kernel != teacher::kTokenSpan || hp.patch_stride != teacher::kStepSamples) {
    return bad("patch_kernel " + std::to_string(teacher::kTokenSpan) + " and patch_stride " +
               std::to_string(teacher::kStepSamples) + " (the file has " + std::to_string(hp.patch_kernel) +
               " and " + std::to_string(hp.patch_stride) + ")");
  }
  if (hp.sample_rate != 16000) return bad("a sample rate of 16000 Hz");
  if (hp.ema_direction != EmaDirection::unidirectional) return bad("a unidirectional model");
  if (hp.patch_norm != PatchNorm::off) return bad("patch_norm off");
  if (info.input_scaling) return bad("no input scaling (the front end scales the samples itself)");
  return true;
}

// What the model is: schema version, hyperparameters, sample rate, input
// scaling, labels, detection defaults, provenance.
bool read_metadata(const fb::Model* m, ModelInfo& info, LoadError* err) {
  info.schema_version = m->schema_version();
  if (info.schema_version > kSchemaVersion) {
    return err->set(Status::unsupported_model, "schema version " + std::to_string(info.schema_version) +
                                                   " is newer than this runtime supports (" +
                                                   std::to_string(kSchemaVersion) + "); upgrade the runtime");
  }
  if (info.schema_version < 1) return err->set(Status::bad_model, "schema version 0 is not valid");
  HParams& hp = info.hparams;
  if (!read_hparams(m->hparams(), &hp, err)) return false;
  hp.sample_rate = m->sample_rate();
  if (!check_range(err, "sample_rate", hp.sample_rate, 1000, 384000)) return false;

  info.input_scaling = m->input_scaling();
  info.input_mean = m->input_mean();
  info.input_std = m->input_std();
  if (info.input_scaling &&
      !(std::isfinite(info.input_mean) && std::isfinite(info.input_std) && info.input_std >= 0.0f)) {
    return err->set(Status::bad_model, "input scaling has a non-finite mean or a negative std");
  }
  if (!check_teacher_front_end(info, err)) return false;
  if (!read_labels(m, hp, &info, err) || !read_detection(m->detection(), hp, &info, err)) return false;
  if (const fb::Provenance* p = m->provenance()) {
    if (p->converter_version()) info.converter_version = p->converter_version()->str();
    if (p->source_sha256()) info.source_sha256 = p->source_sha256()->str();
    if (p->source_format()) info.source_format = p->source_format()->str();
    if (p->notes()) info.notes = p->notes()->str();
  }
  return true;
}

// The converter's check: an input and the logits it must give, within a tolerance.
bool read_self_test(const fb::SelfTest* st, ModelData* md, LoadError* err) {
  const HParams& hp = md->info.hparams;
  ModelInfo& info = md->info;
  if (st->input() && st->expected_logits()) {
    const int64_t n_in = st->input()->size();
    if (n_in <= 0 || n_in > (int64_t(1) << 24) || int64_t(st->expected_logits()->size()) != hp.n_classes) {
      return err->set(Status::bad_model, "self-test has " + std::to_string(n_in) + " samples and " +
                                             std::to_string(st->expected_logits()->size()) + " logits for " +
                                             std::to_string(hp.n_classes) + " classes");
    }
    md->self_test_input.assign(st->input()->begin(), st->input()->end());
    md->self_test_logits.assign(st->expected_logits()->begin(), st->expected_logits()->end());
    md->self_test_tolerance = st->tolerance();
    for (float v : md->self_test_input) {
      if (!std::isfinite(v)) return err->set(Status::bad_model, "self-test input has a non-finite sample");
    }
    for (float v : md->self_test_logits) {
      if (!std::isfinite(v)) return err->set(Status::bad_model, "self-test logits are not finite");
    }
    if (!(md->self_test_tolerance > 0.0f && md->self_test_tolerance < 1.0f)) {
      return err->set(Status::bad_model, "self-test tolerance must be in (0, 1)");
    }
    info.self_test_samples = n_in;
  }
  return true;
}

// The float16 peaks the converter measured (schema 5), where the file has them.
bool read_fp16_range(const fb::Fp16Range* r, ModelInfo& info, LoadError* err) {
  if (!r) return true;
  const HParams& hp = info.hparams;
  Fp16Peaks& fp = info.fp16_peaks;
  if (!read_fp16_peak(r->residual(), "residual", hp.n_layers, &fp.residual, err) ||
      !read_fp16_peak(r->other(), "other", hp.n_layers, &fp.other, err)) {
    return false;
  }
  fp.present = true;
  return true;
}

bool load_model(const uint8_t* buf, size_t size, ModelData* md, LoadError* err) {
  if (!check_container(buf, size, err)) return false;
  const fb::Model* m = fb::GetModel(buf);
  if (!read_metadata(m, md->info, err)) return false;
  if (const fb::SelfTest* st = m->self_test()) {
    if (!read_self_test(st, md, err)) return false;
  }
  return read_fp16_range(m->fp16_range(), md->info, err) && load_tensors(m, md, err);
}

std::shared_ptr<const Model> finish(std::unique_ptr<ModelData> md, LoadError& err, const std::string& what,
                                    std::string* error, Status* status) {
  if (status) *status = err.status;
  if (err.failed()) {
    if (error) *error = what + ": " + err.message;
    return nullptr;
  }
  return ModelAccess::wrap(std::move(md));
}

}  // namespace

struct Model::Impl {
  std::unique_ptr<ModelData> data;
};

Model::Model() = default;
Model::~Model() = default;

std::shared_ptr<const Model> ModelAccess::wrap(std::unique_ptr<ModelData> md) {
  std::shared_ptr<Model> m(new Model());
  m->impl_.reset(new Model::Impl{std::move(md)});
  return m;
}

const ModelData& ModelAccess::data(const Model& m) { return *m.impl_->data; }
const ModelWeights& model_weights(const Model& m) { return ModelAccess::data(m); }

const ModelInfo& Model::info() const { return impl_->data->info; }
const std::vector<float>& Model::self_test_input() const { return impl_->data->self_test_input; }
const std::vector<float>& Model::self_test_logits() const { return impl_->data->self_test_logits; }
float Model::self_test_tolerance() const { return impl_->data->self_test_tolerance; }

Status Model::check_self_test(const float* logits, float* max_abs_diff) const {
  const std::vector<float>& want = self_test_logits();
  if (max_abs_diff) *max_abs_diff = 0.0f;
  if (want.empty() || !logits) return Status::invalid_argument;
  float worst = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) {
    const float d = std::fabs(logits[i] - want[i]);
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  if (max_abs_diff) *max_abs_diff = worst;
  return worst <= self_test_tolerance() ? Status::ok : Status::self_test_failed;
}

std::shared_ptr<const Model> Model::load(const std::string& path, std::string* error, Status* status) {
  LoadError err;
  auto md = std::make_unique<ModelData>();
  // O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer; fstat refuses it below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    err.set(Status::io_error, std::string("cannot open: ") + std::strerror(errno));
    return finish(nullptr, err, path, error, status);
  }
  struct stat sb;
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    ::close(fd);
    err.set(Status::io_error, "not a regular file");
    return finish(nullptr, err, path, error, status);
  }
  const size_t size = size_t(sb.st_size);
  if (size < kMinFileBytes) {
    ::close(fd);
    err.set(Status::bad_model, "file is too small to be a model (" + std::to_string(size) + " bytes)");
    return finish(nullptr, err, path, error, status);
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    err.set(Status::io_error, std::string("cannot map: ") + std::strerror(errno));
    return finish(nullptr, err, path, error, status);
  }
  md->mapping = std::shared_ptr<void>(p, [size](void* q) { ::munmap(q, size); });
  md->info.file_bytes = int64_t(size);
  load_model(static_cast<const uint8_t*>(p), size, md.get(), &err);
  return finish(std::move(md), err, path, error, status);
}

std::shared_ptr<const Model> Model::load_from_memory(const void* data, size_t size, std::string* error,
                                                     Status* status) {
  LoadError err;
  auto md = std::make_unique<ModelData>();
  if (!data && size) {
    err.set(Status::invalid_argument, "null data");
    return finish(nullptr, err, "<memory>", error, status);
  }
  // Copy into 64-byte aligned storage so tensors can be used in place.
  void* p = nullptr;
  if (::posix_memalign(&p, 64, size ? size : 1) != 0) {
    err.set(Status::out_of_memory, "cannot allocate " + std::to_string(size) + " bytes");
    return finish(nullptr, err, "<memory>", error, status);
  }
  if (size) std::memcpy(p, data, size);
  md->mapping = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  md->info.file_bytes = int64_t(size);
  load_model(static_cast<const uint8_t*>(p), size, md.get(), &err);
  return finish(std::move(md), err, "<memory>", error, status);
}

}  // namespace mega
