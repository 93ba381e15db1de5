// SPDX-License-Identifier: Apache-2.0
// info: the model's metadata, one field per line (or one JSON object).
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>

#include "cli_output.h"
#include "commands.h"
#include "model_setup.h"

namespace kws {

namespace {

const char* const kAttention[] = {"laplace", "softmax", "relu2"};
const char* const kNorm[] = {"batchnorm", "layernorm", "scalenorm", "rmsnorm"};
const char* const kActivation[] = {"silu", "relu", "gelu", "gelu_accurate", "linear"};
const char* const kFeatures[] = {"linear", "log_power", "log_mel", "teacher_embedding"};

// "what: None ?": a placeholder where a figure belongs (notes written before
// the figure was known, as models/sc10-demo.mega's were).
bool is_placeholder_clause(const std::string& clause) {
  const size_t colon = clause.rfind(':');
  if (colon == std::string::npos) return false;
  std::istringstream rest(clause.substr(colon + 1));
  std::string word;
  int n = 0;
  while (rest >> word) {
    if (word != "None" && word != "?" && word != "nan" && word != "NaN" && word != "null" && word != "n/a") return false;
    ++n;
  }
  return n > 0;
}

// The notes without their placeholder clauses. Clauses end at "; " or ". "
// (or the end); a dropped clause's sentence end moves to the clause before.
std::string notes_without_placeholders(const std::string& notes) {
  std::string out, delim;  // delim: the last kept clause's, not yet written
  size_t start = 0;
  while (start < notes.size()) {
    size_t end = start;
    while (end < notes.size() &&
           !((notes[end] == ';' || notes[end] == '.') && (end + 1 == notes.size() || notes[end + 1] == ' '))) {
      ++end;
    }
    const std::string clause = notes.substr(start, end - start);
    const std::string d = notes.substr(end, std::min<size_t>(2, notes.size() - end));
    start = end + d.size();
    if (!is_placeholder_clause(clause)) {
      out += delim + clause;
      delim = d;
    } else if (d.empty()) {  // the last clause: end as the one before ended its sentence
      delim = delim.empty() || delim[0] == ';' ? "" : delim.substr(0, 1);
    } else if (d[0] == '.') {
      if (!out.empty()) delim = d;
    }
  }
  return out + delim;
}

void print_info_json(const Params& p, const mega::ModelInfo& in) {
  const mega::HParams& h = in.hparams;
  JsonLine hp;
  hp.integer("embed_dim", h.embed_dim).integer("hidden_dim", h.hidden_dim).integer("ffn_hidden_dim", h.ffn_hidden_dim);
  hp.integer("z_dim", h.z_dim).integer("n_dim", h.n_dim).integer("n_layers", h.n_layers);
  hp.integer("chunk_size", h.chunk_size).integer("chunk_samples", h.chunk_samples());
  hp.str("ema", h.ema_direction == mega::EmaDirection::unidirectional ? "unidirectional" : "bidirectional");
  hp.integer("truncation", h.truncation).str("attention", kAttention[int(h.attention_fn)]);
  hp.str("norm", kNorm[int(h.norm_type)]).boolean("prenorm", h.prenorm);
  hp.str("activation", kActivation[int(h.activation)]).integer("classifier_layers", h.classifier_layers);
  hp.integer("classifier_dim", h.classifier_dim).str("classifier_activation", kActivation[int(h.classifier_activation)]);
  hp.integer("patch_kernel", h.patch_kernel).integer("patch_stride", h.patch_stride);
  hp.str("patch_features", kFeatures[int(h.patch_features)]);
  if (h.patch_features == mega::PatchFeatures::log_mel) hp.integer("patch_bins", h.patch_bins).integer("patch_bands", h.patch_bands);
  hp.str("patch_norm", h.patch_norm == mega::PatchNorm::running_mean ? "running_mean" : "none");
  if (h.patch_norm == mega::PatchNorm::running_mean) hp.num("patch_norm_decay", double(h.patch_norm_decay));
  hp.integer("window_chunks", h.window_chunks).integer("window_samples", h.window_samples());
  hp.integer("sample_rate", h.sample_rate);
  JsonLine det;
  det.nums("thresholds", in.detection.thresholds).integer("smoothing_hops", in.detection.smoothing_hops);
  det.integer("refractory_ms", in.detection.refractory_ms);
  JsonLine j;
  j.str("model", p.model_path).integer("schema_version", in.schema_version).strings("labels", in.labels);
  j.raw("hparams", hp.text());
  if (in.input_scaling) {
    JsonLine sc;
    sc.num("mean", double(in.input_mean)).num("std", double(in.input_std));
    j.raw("input_scaling", sc.text());
  } else {
    j.raw("input_scaling", "null");
  }
  j.integer("n_params", in.n_params).str("dtype", in.fp16 ? "float16" : "float32").integer("file_bytes", in.file_bytes);
  j.raw("detection", det.text());
  j.str("converter_version", in.converter_version).str("source_format", in.source_format);
  j.str("source_sha256", in.source_sha256).str("notes", notes_without_placeholders(in.notes));
  j.boolean("self_test", in.self_test_samples > 0);
  j.end();
}

}  // namespace

int cmd_info(const Params& p) {
  auto model = load_model(p);
  if (!model) return kExitModel;
  const mega::Model& m = *model;
  const mega::ModelInfo& in = m.info();
  if (p.json) {
    print_info_json(p, in);
    return kExitOk;
  }
  const mega::HParams& h = in.hparams;
  std::string labels;
  for (size_t i = 0; i < in.labels.size(); ++i) labels += (i ? "," : "") + in.labels[i];
  std::printf("model            %s\n", p.model_path.c_str());
  std::printf("schema version   %u\n", in.schema_version);
  std::printf("labels           %s\n", labels.c_str());
  std::printf("dims             D=%d H=%d FFN=%d Z=%d N=%d\n", h.embed_dim, h.hidden_dim, h.ffn_hidden_dim, h.z_dim,
              h.n_dim);
  std::printf("layers           %d\n", h.n_layers);
  std::printf("chunk            %d tokens = %lld samples\n", h.chunk_size, (long long)h.chunk_samples());
  std::printf("EMA              %s, truncation %d%s\n",
              h.ema_direction == mega::EmaDirection::unidirectional ? "unidirectional (streams)"
                                                                     : "bidirectional (clips only)",
              h.truncation, h.truncation == 0 ? " (none)" : "");
  std::printf("attention        %s\n", kAttention[int(h.attention_fn)]);
  std::printf("norm             %s (%s)\n", kNorm[int(h.norm_type)], h.prenorm ? "prenorm" : "postnorm");
  std::printf("activation       %s; classifier %d x %d, %s\n", kActivation[int(h.activation)], h.classifier_layers,
              h.classifier_dim, kActivation[int(h.classifier_activation)]);
  std::printf("embedding        patch kernel %d, stride %d, ", h.patch_kernel, h.patch_stride);
  if (h.patch_features == mega::PatchFeatures::log_mel) {
    std::printf("log-mel features (%d bins in %d bands)", h.patch_bins, h.patch_bands);
  } else if (h.patch_features == mega::PatchFeatures::teacher_embedding) {
    std::printf("the teacher's melspectrogram and speech embedding, projected");
  } else {
    std::printf("%s", h.patch_features == mega::PatchFeatures::log_power ? "log-power features" : "linear");
  }
  if (h.patch_norm == mega::PatchNorm::running_mean) {
    std::printf(" less their running mean (decay %g)", double(h.patch_norm_decay));
  }
  std::printf("\n");
  std::printf("window           %d chunks = %.3f s at %d Hz", h.window_chunks,
              double(h.window_samples()) / h.sample_rate, h.sample_rate);
  if (h.patch_features == mega::PatchFeatures::teacher_embedding) {  // its first token looks far back
    std::printf(" (and the %.3f s before it, which its first token reads)",
                double(h.patch_kernel - h.patch_stride) / h.sample_rate);
  }
  std::printf("\n");
  if (in.input_scaling) {
    std::printf("input scaling    (x - %g) / (%g + 1e-5)\n", in.input_mean, in.input_std);
  } else {
    std::printf("input scaling    none\n");
  }
  std::printf("parameters       %lld (%s), file %lld bytes\n", (long long)in.n_params, in.fp16 ? "float16" : "float32",
              (long long)in.file_bytes);
  if (in.detection.thresholds.empty()) {
    std::printf("detection        no tuned thresholds; smoothing %d hops, refractory %d ms\n",
                in.detection.smoothing_hops, in.detection.refractory_ms);
  } else {
    std::printf("detection        thresholds");
    for (float t : in.detection.thresholds) std::printf(" %.3f", t);
    std::printf("; smoothing %d hops, refractory %d ms\n", in.detection.smoothing_hops, in.detection.refractory_ms);
  }
  std::printf("converter        %s (source %s, sha256 %s)\n", in.converter_version.c_str(),
              in.source_format.c_str(), in.source_sha256.c_str());
  const std::string notes = notes_without_placeholders(in.notes);
  if (!notes.empty()) std::printf("notes            %s\n", notes.c_str());
  std::printf("self-test        %s\n", in.self_test_samples ? "present" : "absent");
  return kExitOk;
}

}  // namespace kws
