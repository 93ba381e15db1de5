// SPDX-License-Identifier: Apache-2.0
// keyword_spotter's command line: the commands, the options each accepts
// (one table, which --help prints), and the options into Params.
#include "cli_options.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "default_model.h"
#include "mega/detection_limits.hpp"
#include "parse_number.h"

namespace kws {

namespace {

// The commands, as bits: which commands an option applies to.
enum : unsigned { kClassify = 1, kScan = 2, kListen = 4, kDevices = 8, kInfo = 16, kSelftest = 32 };
constexpr unsigned kAll = kClassify | kScan | kListen | kDevices | kInfo | kSelftest;
constexpr unsigned kWithModel = kAll & ~kDevices;
constexpr unsigned kWithEngine = kClassify | kScan | kListen | kSelftest;
constexpr unsigned kDetecting = kScan | kListen;

struct Command {
  const char* name;
  unsigned bit;
  const char* operands;  // after [options]
  const char* help;
};

const Command kCommands[] = {
    {"classify", kClassify, " FILE...", "classify audio clips (any format libsndfile reads, any rate, mono or stereo)"},
    {"scan", kScan, " FILE...",
     "stream recordings of any length and print each keyword detection; FILE '-' is standard input: a stream "
     "with a header libsndfile decodes (WAV, AIFF, AU, FLAC, Ogg, CAF, ...: what its file gives), or else raw "
     "signed 16-bit little-endian mono at 16 kHz (arecord -f S16_LE -r 16000 | keyword_spotter scan -); "
     "SIGINT/SIGTERM: the summary, then exit 130/143"},
    {"listen", kListen, "", "spot keywords live on a microphone (PortAudio)"},
    {"devices", kDevices, "", "list audio input devices"},
    {"info", kInfo, "", "print the model's metadata"},
    {"selftest", kSelftest, "", "run the self-test stored in the model file (exit 0 if it passes)"},
};

struct Option {
  const char* short_name;  // null if none
  const char* long_name;
  const char* value;       // its value's name; null: a switch
  unsigned commands;
  const char* help;
  const char* default_value;  // null: none shown
};

const Option kOptions[] = {
    {"-m", "--model", "PATH", kWithModel, "model file (.mega)", "$MEGA_KWS_MODEL, else the installed demo model"},
    {"-j", "--json", nullptr, kAll, "machine-readable output (JSON)", "off"},
    {"-b", "--block-size", "N", kClassify, "stream each clip N samples at a time (1..2^30)", "whole clip"},
    {"-k", "--kernels", "NAME", kWithEngine, kKernelsHelp.help, kKernelsHelp.default_value},
    {nullptr, "--backend", "NAME", kWithEngine, kBackendHelp.help, kBackendHelp.default_value},
    {nullptr, "--fp16", nullptr, kWithEngine, kFp16Help.help, kFp16Help.default_value},
    {"-t", "--threads", "N", kWithEngine, kThreadsHelp.help, kThreadsHelp.default_value},
    {"-d", "--device", "NAME|IDX", kListen, "input device (name substring or index)", "default input"},
    {"-s", "--seconds", "S", kListen, "stop after S s (0.001..1e7)", "until Ctrl-C"},
    {nullptr, "--threshold", "T|L=T,..", kDetecting,
     "detection threshold in (0, 1]: T for every keyword, or per keyword by label (go=0.8,on=0.85; the others keep "
     "the model's)", "from the model"},
    {nullptr, "--smoothing", "H", kDetecting, "posteriors averaged over H chunk hops (1..1024)", "from the model"},
    {nullptr, "--refractory-ms", "MS", kDetecting, "quiet time after a detection (0..600000)", "from the model"},
    {nullptr, "--sensitivity", "S", kDetecting, "0..1; 0.5 keeps the thresholds, higher fires more", "0.5"},
    {"-v", "--verbose", nullptr, kListen | kDevices, "ALSA's and JACK's own messages while probing", "off"},
    {"-h", "--help", nullptr, kAll, "this help", nullptr},
};

// What --json writes, per command (README's command-line section says the same).
struct JsonFormat {
  unsigned commands;
  const char* text;
};

const JsonFormat kJsonFormats[] = {
    {kAll, "--json: one JSON object per line, valid UTF-8 (a file name that is not UTF-8: U+FFFD for its bad\n"
           "bytes, and its exact bytes in hex as \"file_hex\")\n"},
    {kClassify, "  classify, per file: {\"type\": \"classification\", \"file\", \"label\", \"score\", \"logits\", ...}\n"
                "    or {\"type\": \"error\", \"file\", \"error\"}\n"},
    {kScan, "  scan, per file: {\"type\": \"detection\", \"file\", \"time_s\", \"label\", \"score\"} for each detection,\n"
            "    then {\"type\": \"summary\", \"file\", \"duration_s\", \"detections\", \"clipped_samples\"}\n"
            "    or {\"type\": \"error\", \"file\", \"error\"}; standard input is \"file\": \"-\"\n"},
    {kListen, "  listen: {\"type\": \"detection\", \"time_s\", \"label\", \"score\"} for each detection\n"},
    {kDevices, "  devices: one object per input device; none: {\"devices\": [], \"error\"}\n"},
};

void print_json_format(FILE* out, unsigned commands) {
  for (const JsonFormat& f : kJsonFormats) {
    if (f.commands & commands) std::fprintf(out, "%s", f.text);
  }
}

const char kExitCodes[] =
    "exit codes: 0 ok; 1 a file, the self-test, a stream or writing the output failed; 2 usage error;\n"
    "            3 model not loadable; 4 audio or compute device error\n";

// "  -b, --block-size N   help [default] (commands)", the text wrapped at
// kWidth columns under itself.
void print_option(FILE* out, const Option& o, bool say_commands) {
  constexpr size_t kIndent = 29, kWidth = 110;
  std::string flags = std::string(o.short_name ? o.short_name : "  ") + (o.short_name ? ", " : "  ") + o.long_name;
  if (o.value) flags += std::string(" ") + o.value;
  std::string text = o.help;
  if (o.default_value) text += std::string(" [") + o.default_value + "]";
  if (say_commands && o.commands != kAll) {
    std::string cmds;
    for (const Command& c : kCommands) {
      if (o.commands & c.bit) cmds += std::string(cmds.empty() ? "" : ", ") + c.name;
    }
    text += " (" + cmds + ")";
  }
  std::string line = "  " + flags + std::string(kIndent - std::min(kIndent - 1, flags.size() + 2), ' ');
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.size();
    if (line.size() + (end - start) > kWidth) {  // break at the last space that fits
      const size_t space = text.rfind(' ', start + (kWidth - line.size()));
      if (space != std::string::npos && space > start) end = space;
    }
    line += text.substr(start, end - start);
    std::fprintf(out, "%s\n", line.c_str());
    line.assign(kIndent, ' ');
    start = end + (end < text.size() ? 1 : 0);
  }
}

void print_usage(FILE* out) {
  std::fprintf(out, "usage: keyword_spotter COMMAND [options] ...\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.help);
  std::fprintf(out, "\noptions [default] (the commands they apply to; keyword_spotter COMMAND --help: its own):\n");
  for (const Option& o : kOptions) print_option(out, o, true);
  std::fprintf(out, "      --version              the version\n\n");
  print_json_format(out, kAll);
  std::fprintf(out, "\n%s", kExitCodes);
  std::fprintf(out, "\nthe benchmark (real-time factor, latency, memory) is a program of its own: mega_rtf\n");
}

void print_command_usage(FILE* out, const Command& c) {
  std::fprintf(out, "usage: keyword_spotter %s [options]%s\n\n%s\n\noptions [default]:\n", c.name, c.operands, c.help);
  for (const Option& o : kOptions) {
    if (o.commands & c.bit) print_option(out, o, false);
  }
  if (c.bit & (kClassify | kScan | kListen | kDevices)) {
    std::fprintf(out, "\n");
    print_json_format(out, c.bit);
  }
  std::fprintf(out, "\n%s", kExitCodes);
}

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "keyword_spotter: %s (try --help)\n", msg.c_str());
  return kExitUsage;
}

const Option* find_option(const std::string& name) {
  for (const Option& o : kOptions) {
    if (name == o.long_name || (o.short_name && name == o.short_name)) return &o;
  }
  return nullptr;
}

bool parse_unit(const std::string& s, float* out) {  // (0, 1]
  double v = 0.0;
  if (!parse_float(s.c_str(), 0.0, 1.0, &v) || v <= 0.0) return false;
  *out = float(v);
  return true;
}

// "go=0.8,on=0.85": labels checked against the model later (make_detector).
bool parse_label_thresholds(const std::string& v, Params* p, std::string* why) {
  p->label_thresholds.clear();
  size_t start = 0;
  while (start <= v.size()) {
    const size_t comma = std::min(v.find(',', start), v.size());
    const std::string item = v.substr(start, comma - start);
    const size_t eq = item.find('=');
    float t = 0.0f;
    if (eq == 0 || eq == std::string::npos || !parse_unit(item.substr(eq + 1), &t)) {
      *why = "--threshold: '" + item + "' is not LABEL=T with T in (0, 1]";
      return false;
    }
    const std::string label = item.substr(0, eq);
    for (const auto& lt : p->label_thresholds) {
      if (lt.first == label) {
        *why = "--threshold: '" + label + "' given twice";
        return false;
      }
    }
    p->label_thresholds.emplace_back(label, t);
    start = comma + 1;
  }
  return true;
}

std::string integer_range(int64_t lo, int64_t hi) {
  return "needs an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

// One option and its value (null for a switch): stored in *p, or false and *why.
bool take_option(const Option& o, const char* v, Params* p, std::string* why) {
  const std::string name = o.long_name;
  int64_t iv = 0;
  double fv = 0.0;
  auto bad = [&](const std::string& msg) {
    *why = name + " " + msg;
    return false;
  };
  if (name == "--model") {
    if (!*v) return bad("needs a path");
    p->model_path = v;
  } else if (name == "--json") {
    p->json = true;
  } else if (name == "--verbose") {
    p->verbose = true;
  } else if (name == "--block-size") {
    if (!parse_int(v, 1, int64_t(1) << 30, &iv)) return bad("needs an integer in [1, 1073741824]");
    p->block_size = iv;
  } else if (name == "--device") {
    p->device = v;
  } else if (name == "--seconds") {
    if (!parse_float(v, 0.001, 1e7, &fv)) return bad("needs a number in [0.001, 1e7]");
    p->seconds = fv;
  } else if (name == "--threshold") {
    if (std::strchr(v, '=')) {
      p->threshold = -1.0f;
      return parse_label_thresholds(v, p, why);
    }
    if (!parse_unit(v, &p->threshold)) return bad("needs a number in (0, 1], or LABEL=T,...");
    p->label_thresholds.clear();
  } else if (name == "--smoothing") {
    if (!parse_int(v, mega::kMinSmoothingHops, mega::kMaxSmoothingHops, &iv)) {
      return bad(integer_range(mega::kMinSmoothingHops, mega::kMaxSmoothingHops));
    }
    p->smoothing = int32_t(iv);
  } else if (name == "--refractory-ms") {
    if (!parse_int(v, mega::kMinRefractoryMs, mega::kMaxRefractoryMs, &iv)) {
      return bad(integer_range(mega::kMinRefractoryMs, mega::kMaxRefractoryMs));
    }
    p->refractory_ms = int32_t(iv);
  } else if (name == "--sensitivity") {
    if (!parse_float(v, 0.0, 1.0, &fv)) return bad("needs a number in [0, 1]");
    p->sensitivity = float(fv);
  } else {  // the engine's (engine_flags.h), as mega_rtf takes them
    const char* engine_why = nullptr;
    if (set_engine_flag(o.long_name, v, p, &engine_why) == FlagResult::bad) {
      *why = engine_why;
      return false;
    }
  }
  return true;
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
  if (p->command == "--version") {
    std::printf("keyword_spotter %s\n", MEGA_KWS_VERSION_STRING);
    return kExitOk;
  }
  if (p->command == "bench") {
    std::fprintf(stderr, "keyword_spotter: bench is now a program of its own: mega_rtf (the build's bench/mega_rtf; "
                         "same options)\n");
    return kExitUsage;
  }
  const Command* cmd = nullptr;
  for (const Command& c : kCommands) {
    if (p->command == c.name) cmd = &c;
  }
  if (!cmd) return usage_error("unknown command '" + p->command + "'");
  bool options_end = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (options_end || a == "-" || a.empty() || a[0] != '-') {
      p->files.push_back(a);
      continue;
    }
    if (a == "--") {
      options_end = true;
      continue;
    }
    // --name=value
    const size_t eq = a.compare(0, 2, "--") == 0 ? a.find('=') : std::string::npos;
    const std::string name = a.substr(0, eq);
    const Option* o = find_option(name);
    if (!o) return usage_error("unknown option '" + name + "'");
    if (!(o->commands & cmd->bit)) return usage_error("option " + std::string(o->long_name) + " does not apply to " + cmd->name);
    if (std::strcmp(o->long_name, "--help") == 0) {
      print_command_usage(stdout, *cmd);
      return kExitOk;
    }
    const char* v = nullptr;
    if (eq != std::string::npos) {
      if (!o->value) return usage_error(name + " takes no value");
      v = argv[i] + eq + 1;
    } else if (o->value) {
      if (i + 1 >= argc) return usage_error(name + " needs a value (" + o->value + ")");
      v = argv[++i];
    }
    std::string why;
    if (!take_option(*o, v, p, &why)) return usage_error(why);
  }
  if ((cmd->bit & kWithModel) && p->model_path.empty()) {
    std::string tried;
    p->model_path = default_model_path(&tried);
    if (p->model_path.empty()) return usage_error("no model: give -m PATH (no default model at " + tried + ")");
  }
  if (p->command == "classify" && p->files.empty()) return usage_error("classify needs at least one audio file");
  if (p->command == "scan" && p->files.empty()) return usage_error("scan needs at least one audio file (- for standard input)");
  if (std::count(p->files.begin(), p->files.end(), "-") > 1) return usage_error("standard input (-) can be read only once");
  if (p->command != "classify" && p->command != "scan" && !p->files.empty()) {
    return usage_error(p->command + " takes no files");
  }
  if (const char* why = engine_flags_conflict(*p)) return usage_error(why);
  return -1;
}

}  // namespace kws
