// keyword_spotter's command line: --help, and the options into Params.
#include "cli_options.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "parse_number.h"

namespace kws {

namespace {

void print_usage(FILE* out) {
  std::fprintf(out,
      "usage: keyword_spotter COMMAND [options] [FILE...]\n"
      "\n"
      "commands:\n"
      "  classify   classify audio clips (any format libsndfile reads, any rate, mono or stereo)\n"
      "  scan       stream recordings of any length and print each keyword detection;\n"
      "             FILE '-' is standard input: a WAV stream (RIFF header) or else raw\n"
      "             signed 16-bit little-endian mono at 16 kHz (arecord -f S16_LE -r 16000 | ...)\n"
      "  listen     spot keywords live on a microphone (PortAudio)\n"
      "  devices    list audio input devices\n"
      "  info       print the model's metadata\n"
      "  selftest   run the self-test stored in the model file (exit 0 if it passes)\n"
      "\n"
      "options:                                                        [default]\n"
      "  -m, --model PATH        model file (.mega)                      [required, except devices]\n"
      "  -j, --json              machine-readable output, one JSON object per line   [off]\n"
      "  -b, --block-size N      classify: stream N samples at a time (1..2^30)     [whole clip]\n"
      "  -k, --kernels NAME      optimized | reference (plain scalar loops; cpu)    [optimized]\n"
      "      --backend NAME      cpu | cuda (NVIDIA GPU)                    [cuda if built in and a GPU is present, else cpu]\n"
      "      --fp16              cuda: float16 activations (float32 accumulation)   [off]\n"
      "  -t, --threads N         cpu: threads sharing each chunk's work (1..16)     [1]\n"
      "  -d, --device NAME|IDX   listen: input device (name substring or index)     [default input]\n"
      "  -s, --seconds S         listen: stop after S s (0.001..1e7)                [until Ctrl-C]\n"
      "      --threshold T       detection threshold for every keyword, 0..1        [from the model]\n"
      "      --smoothing H       posteriors averaged over H chunk hops (1..1024)    [from the model]\n"
      "      --refractory-ms MS  quiet time after a detection (0..600000)           [from the model]\n"
      "      --sensitivity S     0..1; 0.5 keeps the thresholds, higher fires more  [0.5]\n"
      "  -v, --verbose           listen, devices: ALSA's and JACK's own messages    [off]\n"
      "  -h, --help              this help\n"
      "\n"
      "exit codes: 0 ok; 1 a file, the self-test or a stream failed; 2 usage error;\n"
      "            3 model not loadable; 4 audio or compute device error\n"
      "\n"
      "the benchmark (real-time factor, latency, memory) is a program of its own: mega_rtf\n");
}

int usage_error(const char* fmt, const char* arg = "") {
  std::fprintf(stderr, "keyword_spotter: ");
  std::fprintf(stderr, fmt, arg);
  std::fprintf(stderr, " (try --help)\n");
  return kExitUsage;
}

}  // namespace

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
    const char* why = nullptr;
    const FlagResult engine_flag = take_engine_flag(argc, argv, &i, p, &why);
    if (engine_flag == FlagResult::bad) return usage_error("%s", why);
    if (engine_flag == FlagResult::taken) continue;
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
    } else if (a == "-v" || a == "--verbose") {
      p->verbose = true;
    } else if (a == "-b" || a == "--block-size") {
      if (!value() || !parse_int(v, 1, int64_t(1) << 30, &iv)) return usage_error("--block-size needs an integer in [1, 1073741824]");
      p->block_size = iv;
    } else if (a == "-d" || a == "--device") {
      if (!value()) return usage_error("--device needs a name or an index");
      p->device = v;
    } else if (a == "-s" || a == "--seconds") {
      if (!value() || !parse_float(v, 0.001, 1e7, &fv)) return usage_error("--seconds needs a number in [0.001, 1e7]");
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
  if (p->command == "scan" && p->files.empty()) return usage_error("scan needs at least one audio file (- for standard input)");
  if (std::count(p->files.begin(), p->files.end(), "-") > 1) return usage_error("standard input (-) can be read only once");
  if (p->command != "classify" && p->command != "scan" && !p->files.empty()) {
    return usage_error("%s takes no files", p->command.c_str());
  }
  if (p->block_size > 0 && p->command != "classify") return usage_error("--block-size is for classify");
  if (const char* why = engine_flags_conflict(*p)) return usage_error("%s", why);
  return -1;
}

}  // namespace kws
