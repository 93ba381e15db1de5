// keyword_spotter: the command-line front end of the runtime.
//
//   keyword_spotter classify -m MODEL [--json] [--block-size N] FILE...
//   keyword_spotter scan     -m MODEL [--json] FILE
//   keyword_spotter listen   -m MODEL [--device NAME|INDEX] [--json]
//   keyword_spotter devices
//   keyword_spotter info     -m MODEL
//   keyword_spotter selftest -m MODEL
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "commands.h"

namespace kws {

namespace {

void print_usage(FILE* out) {
  std::fprintf(out,
      "usage: keyword_spotter COMMAND [options] [FILE...]\n"
      "\n"
      "commands:\n"
      "  classify   classify audio clips (any format libsndfile reads, any rate, mono or stereo)\n"
      "  scan       stream a recording of any length and print each keyword detection\n"
      "  listen     spot keywords live on a microphone (PortAudio)\n"
      "  devices    list audio input devices\n"
      "  info       print the model's metadata\n"
      "  selftest   run the self-test stored in the model file (exit 0 if it passes)\n"
      "\n"
      "options:                                                        [default]\n"
      "  -m, --model PATH        model file (.mega)                      [required, except devices]\n"
      "  -j, --json              machine-readable output, one JSON object per line   [off]\n"
      "  -b, --block-size N      classify: stream the clip N samples at a time      [whole clip]\n"
      "  -k, --kernels NAME      optimized | reference (plain scalar loops; cpu)    [optimized]\n"
      "      --backend NAME      cpu | cuda (NVIDIA GPU)                    [cuda if built in and a GPU is present, else cpu]\n"
      "      --fp16              cuda: float16 activations (float32 accumulation)   [off]\n"
      "  -t, --threads N         cpu: threads sharing each chunk's work (1..16)     [1]\n"
      "  -d, --device NAME|IDX   listen: input device (name substring or index)     [default input]\n"
      "  -s, --seconds S         listen: stop after S s                             [until Ctrl-C]\n"
      "      --threshold T       detection threshold for every keyword, 0..1        [from the model]\n"
      "      --smoothing H       posteriors averaged over H chunk hops              [from the model]\n"
      "      --refractory-ms MS  quiet time after a detection                       [from the model]\n"
      "      --sensitivity S     0..1; 0.5 keeps the thresholds, higher fires more  [0.5]\n"
      "  -h, --help              this help\n"
      "\n"
      "exit codes: 0 ok; 1 a file, the self-test or a stream failed; 2 usage error;\n"
      "            3 model not loadable; 4 audio or compute device error\n"
      "\n"
      "the benchmark (real-time factor, latency, memory) is a program of its own: mega_rtf\n");
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

bool parse_float(const char* s, double lo, double hi, double* out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s, &end);
  if (errno != 0 || *end != '\0' || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

int usage_error(const char* fmt, const char* arg = "") {
  std::fprintf(stderr, "keyword_spotter: ");
  std::fprintf(stderr, fmt, arg);
  std::fprintf(stderr, " (try --help)\n");
  return kExitUsage;
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
  if (p->command == "bench") {
    std::fprintf(stderr, "keyword_spotter: bench is now a program of its own: mega_rtf (the build's bench/mega_rtf; "
                         "same options)\n");
    return kExitUsage;
  }
  static const char* kCommands[] = {"classify", "scan", "listen", "devices", "info", "selftest"};
  bool known = false;
  for (const char* c : kCommands) known = known || p->command == c;
  if (!known) return usage_error("unknown command '%s'", argv[1]);
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = nullptr;
    auto value = [&]() -> bool {
      if (i + 1 >= argc) return false;
      v = argv[++i];
      return true;
    };
    int64_t iv = 0;
    double fv = 0.0;
    if (a == "-h" || a == "--help") {
      print_usage(stdout);
      return kExitOk;
    } else if (a == "-m" || a == "--model") {
      if (!value()) return usage_error("%s needs a value", a.c_str());
      p->model_path = v;
    } else if (a == "-j" || a == "--json") {
      p->json = true;
    } else if (a == "-b" || a == "--block-size") {
      if (!value() || !parse_int(v, 1, int64_t(1) << 30, &iv)) return usage_error("--block-size needs a positive integer");
      p->block_size = iv;
    } else if (a == "-k" || a == "--kernels") {
      if (!value() || (std::strcmp(v, "optimized") != 0 && std::strcmp(v, "reference") != 0)) {
        return usage_error("--kernels must be 'optimized' or 'reference'");
      }
      p->kernels = v;
    } else if (a == "--backend") {
      if (!value() || (std::strcmp(v, "cpu") != 0 && std::strcmp(v, "cuda") != 0)) {
        return usage_error("--backend must be 'cpu' or 'cuda'");
      }
      p->backend = v;
    } else if (a == "--fp16") {
      p->fp16 = true;
    } else if (a == "-t" || a == "--threads") {
      if (!value() || !parse_int(v, 1, 16, &iv)) return usage_error("--threads needs an integer in [1, 16]");
      p->threads = int(iv);
    } else if (a == "-d" || a == "--device") {
      if (!value()) return usage_error("--device needs a name or an index");
      p->device = v;
    } else if (a == "-s" || a == "--seconds") {
      if (!value() || !parse_float(v, 0.001, 1e7, &fv)) return usage_error("--seconds needs a positive number");
      p->seconds = fv;
    } else if (a == "--threshold") {
      if (!value() || !parse_float(v, 0.001, 1.0, &fv)) return usage_error("--threshold needs a number in (0, 1]");
      p->threshold = float(fv);
    } else if (a == "--smoothing") {
      if (!value() || !parse_int(v, 1, 1024, &iv)) return usage_error("--smoothing needs an integer in [1, 1024]");
      p->smoothing = int32_t(iv);
    } else if (a == "--refractory-ms") {
      if (!value() || !parse_int(v, 0, 600000, &iv)) return usage_error("--refractory-ms needs an integer in [0, 600000]");
      p->refractory_ms = int32_t(iv);
    } else if (a == "--sensitivity") {
      if (!value() || !parse_float(v, 0.0, 1.0, &fv)) return usage_error("--sensitivity needs a number in [0, 1]");
      p->sensitivity = float(fv);
    } else if (a.size() > 1 && a[0] == '-') {
      return usage_error("unknown option '%s'", a.c_str());
    } else {
      p->files.push_back(a);
    }
  }
  const bool needs_model = p->command != "devices";
  if (needs_model && p->model_path.empty()) return usage_error("-m MODEL is required");
  if (p->command == "classify" && p->files.empty()) return usage_error("classify needs at least one audio file");
  if (p->command == "scan" && p->files.size() != 1) return usage_error("scan takes exactly one audio file");
  if (p->command != "classify" && p->command != "scan" && !p->files.empty()) {
    return usage_error("%s takes no files", p->command.c_str());
  }
  if (p->block_size > 0 && p->command != "classify") return usage_error("--block-size is for classify");
  if (p->backend == "cuda" && p->kernels == "reference") {
    return usage_error("--kernels reference is for the cpu backend");
  }
  if (p->fp16 && p->backend == "cpu") return usage_error("--fp16 needs the cuda backend");
  return -1;
}

}  // namespace

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

std::shared_ptr<const mega::Model> load_model(const Params& p) {
  std::string err;
  auto model = mega::Model::load(p.model_path, &err);
  if (!model) std::fprintf(stderr, "keyword_spotter: cannot load model: %s\n", err.c_str());
  return model;
}

mega::EngineOptions engine_options(const Params& p, int64_t max_clip_samples) {
  mega::EngineOptions opts;
  opts.kernels = p.kernels == "reference" ? mega::KernelImpl::reference : mega::KernelImpl::optimized;
  opts.max_clip_samples = max_clip_samples;
  opts.fp16 = p.fp16;
  opts.n_threads = p.threads;
  return opts;
}

std::unique_ptr<mega::Engine> make_session(const std::shared_ptr<const mega::Model>& m, const Params& p,
                                           int64_t max_clip_samples) {
  std::string err;
  auto s = mega::create_engine(p.backend, m, engine_options(p, max_clip_samples), &err);
  if (!s) std::fprintf(stderr, "keyword_spotter: cannot create a session: %s\n", err.c_str());
  return s;
}

std::unique_ptr<mega::Detector> make_detector(const mega::Model& m, const Params& p) {
  mega::DetectorOverrides o;  // the same rules as the C API's mega_detector_create
  o.threshold = p.threshold;
  o.smoothing_hops = p.smoothing;
  o.refractory_ms = p.refractory_ms;
  o.sensitivity = p.sensitivity;
  std::string err;
  auto d = mega::Detector::for_model(m, o, &err);
  if (!d) std::fprintf(stderr, "keyword_spotter: bad detection settings: %s\n", err.c_str());
  return d;
}

double print_detection(const mega::Model& m, const Params& p, int64_t end_sample, const mega::Detection& d) {
  const mega::HParams& hp = m.hparams();
  const double time_s = mega::Detector::event_time_s(d, end_sample, hp.chunk_samples(), hp.sample_rate);
  const std::string& label = m.labels()[size_t(d.label)];
  if (p.json) {
    std::printf("{\"time_s\": %.4f, \"label\": \"%s\", \"score\": %.4f}\n", time_s, json_escape(label).c_str(),
                d.score);
  } else {
    std::printf("%.3f\t%s\t%.3f\n", time_s, label.c_str(), d.score);
  }
  std::fflush(stdout);
  return time_s;
}

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
  std::printf("embedding        patch kernel %d, stride %d, %s\n", h.patch_kernel, h.patch_stride,
              h.patch_features == mega::PatchFeatures::log_power ? "log-power features" : "linear");
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

int cmd_selftest(const Params& p) {
  auto m = load_model(p);
  if (!m) return kExitModel;
  if (m->info().self_test_samples == 0) {
    std::fprintf(stderr, "keyword_spotter: the model file has no self-test\n");
    return kExitFailed;
  }
  auto s = make_session(m, p, m->info().self_test_samples);
  if (!s) return kExitModel;
  float diff = 0.0f;
  const mega::Status st = s->self_test(&diff);
  if (st == mega::Status::ok) {
    std::printf("self-test passed: max abs logit difference %.3g (tolerance %.3g)\n", diff, m->self_test_tolerance());
    return kExitOk;
  }
  std::printf("self-test FAILED: %s, max abs logit difference %.3g (tolerance %.3g)\n", mega::status_name(st), diff,
              m->self_test_tolerance());
  return kExitFailed;
}

}  // namespace kws

int main(int argc, char** argv) {
  kws::Params p;
  const int rc = kws::parse_args(argc, argv, &p);
  if (rc >= 0) return rc;
  mega::set_blas_threads(1);  // sessions split the work themselves (--threads)
  if (p.command != "info" && p.command != "devices") {
    // the default: cuda when built in and a GPU is present (or --fp16 asks for it), else cpu
    if (p.backend.empty()) p.backend = p.fp16 ? "cuda" : p.kernels == "reference" ? "cpu" : mega::default_backend();
    std::string why;
    if (!mega::backend_available(p.backend, &why)) {
      std::fprintf(stderr, "keyword_spotter: the %s backend is not available: %s\n", p.backend.c_str(), why.c_str());
      return kws::kExitDevice;
    }
  }
  if (p.command == "info") return kws::cmd_info(p);
  if (p.command == "selftest") return kws::cmd_selftest(p);
  if (p.command == "classify") return kws::cmd_classify(p);
  if (p.command == "scan") return kws::cmd_scan(p);
  if (p.command == "listen") return kws::cmd_listen(p);
  return kws::cmd_devices(p);
}
