// info: the model's metadata, one field per line.
#include <cstdio>
#include <string>

#include "commands.h"
#include "model_setup.h"

namespace kws {

int cmd_info(const Params& p) {
  auto model = load_model(p);
  if (!model) return kExitModel;
  const mega::Model& m = *model;
  const mega::ModelInfo& in = m.info();
  const mega::HParams& h = in.hparams;
  static const char* attn[] = {"laplace", "softmax", "relu2"};
  static const char* norm[] = {"batchnorm", "layernorm", "scalenorm", "rmsnorm"};
  static const char* act[] = {"silu", "relu", "gelu", "gelu_accurate", "linear"};
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
  std::printf("attention        %s\n", attn[int(h.attention_fn)]);
  std::printf("norm             %s (%s)\n", norm[int(h.norm_type)], h.prenorm ? "prenorm" : "postnorm");
  std::printf("activation       %s; classifier %d x %d, %s\n", act[int(h.activation)], h.classifier_layers,
              h.classifier_dim, act[int(h.classifier_activation)]);
  std::printf("embedding        patch kernel %d, stride %d, ", h.patch_kernel, h.patch_stride);
  if (h.patch_features == mega::PatchFeatures::log_mel) {
    std::printf("log-mel features (%d bins in %d bands)", h.patch_bins, h.patch_bands);
  } else {
    std::printf("%s", h.patch_features == mega::PatchFeatures::log_power ? "log-power features" : "linear");
  }
  if (h.patch_norm == mega::PatchNorm::running_mean) {
    std::printf(" less their running mean (decay %g)", double(h.patch_norm_decay));
  }
  std::printf("\n");
  std::printf("window           %d chunks = %.3f s at %d Hz\n", h.window_chunks,
              double(h.window_samples()) / h.sample_rate, h.sample_rate);
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
  if (!in.notes.empty()) std::printf("notes            %s\n", in.notes.c_str());
  std::printf("self-test        %s\n", in.self_test_samples ? "present" : "absent");
  return kExitOk;
}

}  // namespace kws
