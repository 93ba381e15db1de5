// keyword_spotter: the command-line front end of the runtime.
//
//   keyword_spotter classify -m MODEL [--json] [--block-size N] FILE...
//   keyword_spotter info -m MODEL
//   keyword_spotter selftest -m MODEL
//
// Exit codes: 0 success; 1 a file failed or the self-test failed; 2 usage
// error; 3 the model could not be loaded.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "audio_file.h"
#include "mega/mega.hpp"

namespace {

constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitModel = 3;
constexpr int64_t kMaxClipSeconds = 600;

struct Params {
  std::string command;
  std::string model_path;
  bool json = false;
  int64_t block_size = 0;  // 0: the whole clip at once (offline)
  std::string kernels = "optimized";
  int threads = 1;
  std::vector<std::string> files;
};

void print_usage(FILE* out) {
  std::fprintf(out,
               "usage: keyword_spotter COMMAND -m MODEL [options] [FILE...]\n"
               "\n"
               "commands:\n"
               "  classify   classify whole audio clips (WAV/FLAC/OGG at the model's rate)\n"
               "  info       print the model's metadata\n"
               "  selftest   run the self-test stored in the model file (exit 0 if it passes)\n"
               "\n"
               "options:\n"
               "  -m, --model PATH      model file (.mega)                       [required]\n"
               "  -j, --json            one JSON object per line                 [off]\n"
               "  -b, --block-size N    stream the clip N samples at a time      [0 = whole clip, offline]\n"
               "  -k, --kernels NAME    optimized | reference                    [optimized]\n"
               "  -t, --threads N       BLAS threads                             [1]\n"
               "  -h, --help            this help\n"
               "\n"
               "exit codes: 0 ok, 1 a file or the self-test failed, 2 usage error, 3 model not loadable\n");
}

bool parse_int(const char* s, int64_t lo, int64_t hi, int64_t* out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// Returns -1 to continue, else an exit code.
int parse_args(int argc, char** argv, Params* p) {
  if (argc < 2) {
    print_usage(stderr);
    return kExitUsage;
  }
  p->command = argv[1];
  if (p->command == "-h" || p->command == "--help" || p->command == "help") {
    print_usage(stdout);
    return kExitOk;
  }
  if (p->command != "classify" && p->command != "info" && p->command != "selftest") {
    std::fprintf(stderr, "keyword_spotter: unknown command '%s' (try --help)\n", argv[1]);
    return kExitUsage;
  }
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "keyword_spotter: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      print_usage(stdout);
      return kExitOk;
    } else if (a == "-m" || a == "--model") {
      const char* v = value("--model");
      if (!v) return kExitUsage;
      p->model_path = v;
    } else if (a == "-j" || a == "--json") {
      p->json = true;
    } else if (a == "-b" || a == "--block-size") {
      const char* v = value("--block-size");
      if (!v || !parse_int(v, 1, int64_t(1) << 30, &p->block_size)) {
        std::fprintf(stderr, "keyword_spotter: --block-size needs a positive integer\n");
        return kExitUsage;
      }
    } else if (a == "-k" || a == "--kernels") {
      const char* v = value("--kernels");
      if (!v) return kExitUsage;
      p->kernels = v;
      if (p->kernels != "optimized" && p->kernels != "reference") {
        std::fprintf(stderr, "keyword_spotter: --kernels must be 'optimized' or 'reference'\n");
        return kExitUsage;
      }
    } else if (a == "-t" || a == "--threads") {
      int64_t t = 0;
      const char* v = value("--threads");
      if (!v || !parse_int(v, 1, 256, &t)) {
        std::fprintf(stderr, "keyword_spotter: --threads needs an integer in [1, 256]\n");
        return kExitUsage;
      }
      p->threads = int(t);
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "keyword_spotter: unknown option '%s' (try --help)\n", a.c_str());
      return kExitUsage;
    } else {
      p->files.push_back(a);
    }
  }
  if (p->model_path.empty()) {
    std::fprintf(stderr, "keyword_spotter: -m MODEL is required (try --help)\n");
    return kExitUsage;
  }
  if (p->command == "classify" && p->files.empty()) {
    std::fprintf(stderr, "keyword_spotter: classify needs at least one audio file\n");
    return kExitUsage;
  }
  if (p->command != "classify" && !p->files.empty()) {
    std::fprintf(stderr, "keyword_spotter: %s takes no files\n", p->command.c_str());
    return kExitUsage;
  }
  return -1;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out;
}

void softmax(const float* logits, int n, std::vector<float>* out) {
  out->resize(size_t(n));
  const float mx = *std::max_element(logits, logits + n);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::exp(double(logits[i] - mx));
  for (int i = 0; i < n; ++i) (*out)[size_t(i)] = float(std::exp(double(logits[i] - mx)) / sum);
}

int cmd_info(const mega::Model& m, const Params& p) {
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
  std::printf("embedding        patch kernel %d, stride %d\n", h.patch_kernel, h.patch_stride);
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

int cmd_selftest(const std::shared_ptr<const mega::Model>& m, mega::Session& s) {
  if (m->info().self_test_samples == 0) {
    std::fprintf(stderr, "keyword_spotter: the model file has no self-test\n");
    return kExitFailed;
  }
  float diff = 0.0f;
  const mega::Status st = s.self_test(&diff);
  if (st == mega::Status::ok) {
    std::printf("self-test passed: max abs logit difference %.3g (tolerance %.3g)\n", diff, m->self_test_tolerance());
    return kExitOk;
  }
  std::printf("self-test FAILED: %s, max abs logit difference %.3g (tolerance %.3g)\n", mega::status_name(st), diff,
              m->self_test_tolerance());
  return kExitFailed;
}

// Streams the (padded) clip in blocks; the result is the last window's logits.
mega::Status classify_streaming(mega::Session& s, const std::vector<float>& clip, int64_t block,
                                std::vector<float>* logits) {
  std::vector<float> padded(clip);
  padded.resize(size_t(s.padded_clip_samples(int64_t(clip.size()))), 0.0f);
  s.reset();
  bool any = false;
  for (size_t off = 0; off < padded.size(); off += size_t(block)) {
    const int64_t n = std::min<int64_t>(block, int64_t(padded.size() - off));
    const mega::Status st = s.push_all(padded.data() + off, n, [&](const mega::ChunkResult& r) {
      std::copy(r.logits, r.logits + logits->size(), logits->begin());
      any = true;
    });
    if (st != mega::Status::ok) return st;
  }
  return any ? mega::Status::ok : mega::Status::invalid_argument;
}

int cmd_classify(const std::shared_ptr<const mega::Model>& m, mega::Session& s, const Params& p) {
  const int n_classes = m->hparams().n_classes;
  const int32_t rate = m->hparams().sample_rate;
  if (p.block_size > 0 && !m->streamable()) {
    std::fprintf(stderr, "keyword_spotter: --block-size needs a streaming (unidirectional) model; this one is "
                         "bidirectional and classifies whole clips only\n");
    return kExitUsage;
  }
  int failures = 0;
  std::vector<float> audio, probs;
  std::vector<float> logits(static_cast<size_t>(n_classes));
  for (const std::string& path : p.files) {
    kws::AudioInfo ai;
    std::string err;
    mega::Status st = mega::Status::ok;
    if (!kws::read_audio_file(path, rate, kMaxClipSeconds * rate, &audio, &ai, &err)) {
      st = mega::Status::io_error;
    } else if (p.block_size > 0) {
      st = classify_streaming(s, audio, p.block_size, &logits);
    } else {
      st = s.classify_clip(audio.data(), int64_t(audio.size()), logits.data());
    }
    if (st != mega::Status::ok && err.empty()) err = mega::status_name(st);
    if (!err.empty()) {
      ++failures;
      if (p.json) {
        std::printf("{\"file\": \"%s\", \"error\": \"%s\"}\n", json_escape(path).c_str(), json_escape(err).c_str());
      } else {
        std::fprintf(stderr, "keyword_spotter: %s: %s\n", path.c_str(), err.c_str());
      }
      std::fflush(stdout);
      continue;
    }
    softmax(logits.data(), n_classes, &probs);
    const int best = int(std::max_element(probs.begin(), probs.end()) - probs.begin());
    const std::string& label = m->labels()[size_t(best)];
    if (p.json) {
      std::printf("{\"file\": \"%s\", \"label\": \"%s\", \"score\": %.6f, \"logits\": [", json_escape(path).c_str(),
                  json_escape(label).c_str(), probs[size_t(best)]);
      for (int i = 0; i < n_classes; ++i) std::printf("%s%.7g", i ? ", " : "", logits[size_t(i)]);
      std::printf("]}\n");
    } else {
      std::printf("%s\t%s\t%.3f\n", path.c_str(), label.c_str(), probs[size_t(best)]);
    }
    std::fflush(stdout);
  }
  return failures ? kExitFailed : kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Params p;
  const int rc = parse_args(argc, argv, &p);
  if (rc >= 0) return rc;
  mega::set_blas_threads(p.threads);
  std::string err;
  mega::Status st = mega::Status::ok;
  auto model = mega::Model::load(p.model_path, &err, &st);
  if (!model) {
    std::fprintf(stderr, "keyword_spotter: cannot load model: %s\n", err.c_str());
    return kExitModel;
  }
  if (p.command == "info") return cmd_info(*model, p);
  mega::SessionOptions opts;
  opts.kernels = p.kernels == "reference" ? mega::KernelImpl::reference : mega::KernelImpl::optimized;
  opts.max_clip_samples = kMaxClipSeconds * model->hparams().sample_rate;
  auto session = mega::Session::create(model, opts, &err, &st);
  if (!session) {
    std::fprintf(stderr, "keyword_spotter: cannot create a session: %s\n", err.c_str());
    return kExitModel;
  }
  if (p.command == "selftest") return cmd_selftest(model, *session);
  return cmd_classify(model, *session, p);
}
