// SPDX-License-Identifier: Apache-2.0
// A model file's tensors, in the order the forward pass uses them: each looked
// up by name and checked (shape, dtype, size, finite values; float16 widened,
// misaligned data copied), and each one named where it is wrong, missing or
// left over. The loader's last stage (model.cpp runs the others first).
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "mega_model_generated.h"
#include "model_load.h"

namespace mega {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      bits = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Looks tensors up by name, checks shape, dtype, size and finiteness, and
// tracks which file tensors were used so leftovers can be reported.
class TensorTable {
 public:
  TensorTable(const fb::Model* m, ModelData* out, LoadError* err) : out_(out), err_(err) {
    const auto* ts = m->tensors();
    for (flatbuffers::uoffset_t i = 0; i < ts->size(); ++i) {
      const fb::Tensor* t = ts->Get(i);
      std::string name = t->name()->str();
      if (!by_name_.emplace(name, t).second) {
        err_->set(Status::bad_model, "tensor '" + name + "' appears twice");
        return;
      }
    }
  }

  const float* get(const std::string& name, std::vector<int64_t> shape) {
    if (err_->failed()) return nullptr;
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      err_->set(Status::bad_model, "missing tensor '" + name + "' (expected shape " + shape_str(shape) + ")");
      return nullptr;
    }
    const fb::Tensor* t = it->second;
    used_.emplace(name);
    std::vector<int64_t> got(t->shape()->begin(), t->shape()->end());
    if (got != shape) {
      err_->set(Status::bad_model,
                "tensor '" + name + "' has shape " + shape_str(got) + ", expected " + shape_str(shape));
      return nullptr;
    }
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    const int32_t dtype = int32_t(t->dtype());
    if (dtype != fb::DType_F32 && dtype != fb::DType_F16) {
      err_->set(Status::unsupported_model, "tensor '" + name + "' has unknown dtype " + std::to_string(dtype));
      return nullptr;
    }
    const size_t elem = dtype == fb::DType_F32 ? 4 : 2;
    if (t->data()->size() != size_t(count) * elem) {
      err_->set(Status::bad_model, "tensor '" + name + "' holds " + std::to_string(t->data()->size()) +
                                       " bytes, expected " + std::to_string(size_t(count) * elem));
      return nullptr;
    }
    const uint8_t* raw = t->data()->data();
    const float* p;
    if (dtype == fb::DType_F16) {
      out_->info.fp16 = true;
      std::unique_ptr<float[]> buf(new (std::nothrow) float[size_t(count) + 1]);
      if (!buf) {
        err_->set(Status::out_of_memory, "no memory for tensor '" + name + "'");
        return nullptr;
      }
      for (int64_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, raw + 2 * i, 2);
        buf[size_t(i)] = half_to_float(h);
      }
      p = buf.get();
      out_->owned.push_back(std::move(buf));
    } else if (reinterpret_cast<uintptr_t>(raw) % 64 != 0) {
      // Written by a tool that did not align: copy rather than read misaligned.
      std::unique_ptr<float[]> buf(new (std::nothrow) float[size_t(count) + 1]);
      if (!buf) {
        err_->set(Status::out_of_memory, "no memory for tensor '" + name + "'");
        return nullptr;
      }
      std::memcpy(buf.get(), raw, size_t(count) * 4);
      p = buf.get();
      out_->owned.push_back(std::move(buf));
    } else {
      p = reinterpret_cast<const float*>(raw);
    }
    for (int64_t i = 0; i < count; ++i) {
      if (!std::isfinite(p[i])) {
        err_->set(Status::bad_model, "tensor '" + name + "' contains a non-finite value at index " +
                                         std::to_string(i));
        return nullptr;
      }
    }
    out_->info.n_params += count;
    return p;
  }

  void check_all_used() {
    if (err_->failed()) return;
    for (const auto& kv : by_name_) {
      if (!used_.count(kv.first)) {
        err_->set(Status::bad_model, "unexpected tensor '" + kv.first + "' (not part of this configuration)");
        return;
      }
    }
  }

 private:
  ModelData* out_;
  LoadError* err_;
  std::map<std::string, const fb::Tensor*> by_name_;
  std::set<std::string> used_;
};

void load_norm(TensorTable& tt, const std::string& prefix, const HParams& hp, NormWeights* n, LoadError* err) {
  const int64_t d = hp.embed_dim;
  n->type = hp.norm_type;
  n->eps = hp.norm_eps;
  switch (hp.norm_type) {
    case NormType::batch_norm: {
      const float* w = tt.get(prefix + "weight", {d});
      const float* b = tt.get(prefix + "bias", {d});
      const float* mean = tt.get(prefix + "running_mean", {d});
      const float* var = tt.get(prefix + "running_var", {d});
      if (err->failed()) return;
      n->bn_scale.resize(size_t(d));
      n->bn_shift.resize(size_t(d));
      for (int64_t i = 0; i < d; ++i) {
        if (!(var[i] >= 0.0f)) {
          err->set(Status::bad_model, "tensor '" + prefix + "running_var' has a negative variance");
          return;
        }
        const double scale = double(w[i]) / std::sqrt(double(var[i]) + double(hp.norm_eps));
        n->bn_scale[size_t(i)] = float(scale);
        n->bn_shift[size_t(i)] = float(double(b[i]) - double(mean[i]) * scale);
      }
      break;
    }
    case NormType::layer_norm:
      n->weight = tt.get(prefix + "weight", {d});
      n->bias = tt.get(prefix + "bias", {d});
      break;
    case NormType::scale_norm: {
      const float* s = tt.get(prefix + "scalar", {1});
      if (s) n->scalar = s[0];
      break;
    }
    case NormType::rms_norm:
      n->weight = tt.get(prefix + "weight", {d});
      break;
  }
}

LinearWeights load_linear(TensorTable& tt, const std::string& prefix, int32_t n_out, int32_t n_in, bool bias) {
  LinearWeights l;
  l.n_out = n_out;
  l.n_in = n_in;
  l.w = tt.get(prefix + "weight", {n_out, n_in});
  if (bias) l.b = tt.get(prefix + "bias", {n_out});
  return l;
}

void load_ema(TensorTable& tt, const std::string& prefix, const HParams& hp, EmaWeights* e, LoadError* err) {
  const int32_t rows = hp.ema_direction == EmaDirection::bidirectional ? 2 * hp.embed_dim : hp.embed_dim;
  const int32_t n = hp.n_dim;
  const float* delta = tt.get(prefix + "delta", {rows, n});
  const float* alpha = tt.get(prefix + "alpha", {rows, n});
  const float* beta = tt.get(prefix + "beta", {rows, n});
  const float* gamma = tt.get(prefix + "gamma", {rows, n});
  e->omega = tt.get(prefix + "omega", {hp.embed_dim});
  if (err->failed()) return;
  e->n_rows = rows;
  e->n_dim = n;
  e->truncation = hp.truncation;
  const size_t count = size_t(rows) * size_t(n);
  e->gain.resize(count);
  e->decay.resize(count);
  e->decay_k.resize(count);
  e->out.resize(count);
  const double scale = std::sqrt(1.0 / double(n));
  for (size_t i = 0; i < count; ++i) {
    const double p = 1.0 / (1.0 + std::exp(-double(delta[i])));
    const double a = 1.0 / (1.0 + std::exp(-double(alpha[i])));
    const double q = 1.0 - p * a;
    e->gain[i] = p * double(beta[i]);
    e->decay[i] = q;
    e->decay_k[i] = hp.truncation > 0 ? std::pow(q, double(hp.truncation)) : 0.0;
    e->out[i] = double(gamma[i]) * scale;
  }
}

// The teacher's graphs (teacher_graph.h) and the projection of its embedding.
bool load_teacher(TensorTable& tt, const HParams& hp, ModelData* md, LoadError* err) {
  namespace t = teacher;
  md->embed_w = tt.get("embed_tokens.weight", {hp.embed_dim, t::kEmbedding});
  md->embed_filters = {md->embed_w, nullptr, hp.embed_dim, t::kEmbedding};
  md->embed_b = tt.get("embed_tokens.bias", {hp.embed_dim});
  t::TeacherWeights& w = md->teacher;
  const float* c = tt.get("teacher.constants", {4});
  w.stft_real = tt.get("teacher.stft_real", {t::kBins, t::kFft});
  w.stft_imag = tt.get("teacher.stft_imag", {t::kBins, t::kFft});
  w.mel = tt.get("teacher.mel", {t::kBins, t::kMel});
  for (int32_t i = 0; i < t::kConvLayers; ++i) {
    const t::ConvSpec& s = t::kConvSpecs[i];
    const std::string p = "teacher.conv" + std::to_string(i) + ".";
    w.conv_weight[i] = tt.get(p + "weight", {s.c_out, s.c_in, s.kh, s.kw});
    if (i + 1 < t::kConvLayers) w.conv_bias[i] = tt.get(p + "bias", {s.c_out});
  }
  if (err->failed()) return false;
  // (values are finite already) the Clip floor goes under a log; a floor 0 dB under the maximum is no floor
  if (!(c[0] > 0.0f && c[1] > 0.0f)) {
    return err->set(Status::bad_model, "tensor 'teacher.constants' needs a positive Clip floor and top_db");
  }
  w.clip_min = c[0], w.top_db = c[1], w.leaky_alpha = c[2], w.max_floor = c[3];
  md->has_teacher = true;
  return true;
}

// The embedding's tensors (its front end's, as the hparams say).
bool load_embedding(TensorTable& tt, const HParams& hp, ModelData* md, LoadError* err) {
  const int32_t d = hp.embed_dim;
  if (hp.patch_features == PatchFeatures::teacher_embedding) return load_teacher(tt, hp, md, err);
  const bool log_power = hp.patch_features == PatchFeatures::log_power;
  const bool log_mel = hp.patch_features == PatchFeatures::log_mel;
  const int64_t filters = log_mel ? 2 * int64_t(hp.patch_bins) : log_power ? 2 * d : d;
  md->embed_w = tt.get("embed_tokens.weight", {filters, hp.patch_kernel});
  md->embed_filters.w = md->embed_w;
  md->embed_filters.n_out = int32_t(filters);
  md->embed_filters.n_in = hp.patch_kernel;
  if (log_power) md->embed_g = tt.get("embed_tokens.scale", {d});
  if (log_mel) {
    md->embed_bands = tt.get("embed_tokens.bands", {hp.patch_bands, hp.patch_bins});
    md->embed_mix = tt.get("embed_tokens.mix", {d, hp.patch_bands});
    // negative band weights could take a log below zero energy: NaN at run time
    for (int64_t i = 0; md->embed_bands && i < int64_t(hp.patch_bands) * hp.patch_bins; ++i) {
      if (md->embed_bands[i] < 0.0f) {
        return err->set(Status::bad_model, "tensor 'embed_tokens.bands' has a negative weight at element " +
                                               std::to_string(i) + "; band weights must be >= 0");
      }
    }
  }
  md->embed_b = tt.get("embed_tokens.bias", {d});
  if (hp.patch_norm == PatchNorm::running_mean) md->embed_m0 = tt.get("embed_tokens.norm_init", {d});
  return true;
}

}  // namespace

bool load_tensors(const fb::Model* m, ModelData* md, LoadError* err) {
  const HParams& hp = md->info.hparams;
  TensorTable tt(m, md, err);
  if (!load_embedding(tt, hp, md, err)) return false;
  const int32_t d = hp.embed_dim, h = hp.hidden_dim, z = hp.z_dim, f = hp.ffn_hidden_dim;
  md->layers.resize(size_t(hp.n_layers));
  for (int32_t i = 0; i < hp.n_layers && !err->failed(); ++i) {
    LayerWeights& L = md->layers[size_t(i)];
    const std::string p = "layers." + std::to_string(i) + ".";
    const std::string ml = p + "mega_layer.";
    load_norm(tt, ml + "norm.norm.", hp, &L.norm, err);
    load_ema(tt, ml + "move.", hp, &L.ema, err);
    L.v_proj = load_linear(tt, ml + "v_proj.", h, d, true);
    L.mx_proj = load_linear(tt, ml + "mx_proj.", z + h + 2 * d, d, true);
    L.h_proj = load_linear(tt, ml + "h_proj.", d, h, true);
    L.qk_gamma = tt.get(ml + "gamma", {2, z});
    L.qk_beta = tt.get(ml + "beta", {2, z});
    L.rel_pos_bias = tt.get(ml + "rel_pos_bias.rel_pos_bias", {2 * int64_t(hp.chunk_size) - 1});
    L.has_ffn = f > 0;
    if (L.has_ffn) {
      load_norm(tt, p + "nffn.norm.norm.", hp, &L.ffn_norm, err);
      L.fc1 = load_linear(tt, p + "nffn.fc1.", f, d, true);
      L.fc2 = load_linear(tt, p + "nffn.fc2.", d, f, true);
    }
  }
  md->has_final_norm = hp.prenorm;
  if (hp.prenorm) load_norm(tt, "final_norm.norm.", hp, &md->final_norm, err);
  for (int32_t j = 0; j < hp.classifier_layers; ++j) {
    const int32_t n_in = j == 0 ? d : hp.classifier_dim;
    md->classifier.push_back(
        load_linear(tt, "classifier." + std::to_string(j) + ".0.", hp.classifier_dim, n_in, true));
  }
  md->projection = load_linear(tt, "sentence_projection_layer.", hp.n_classes, hp.classifier_dim, false);
  tt.check_all_used();
  return !err->failed();
}

}  // namespace mega
