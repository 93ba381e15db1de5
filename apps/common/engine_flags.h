// SPDX-License-Identifier: Apache-2.0
// The command-line options that choose and size an engine (--backend,
// --kernels, --fp16, --threads), as keyword_spotter and bench/mega_rtf both
// take them: parsing, the combinations refused, the default backend and the
// EngineOptions they make.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "mega/engine.hpp"
#include "parse_number.h"

namespace kws {

struct EngineFlags {
  std::string kernels = "optimized";
  std::string backend;  // cpu | reference | cuda; empty = resolve_backend() picks
  bool fp16 = false;    // cuda: float16 storage
  int threads = 1;
};

// What --help says of each option and its default: keyword_spotter's option
// table and mega_rtf's usage print these.
struct EngineFlagHelp {
  const char* help;
  const char* default_value;
};
constexpr EngineFlagHelp kKernelsHelp = {"optimized | reference (plain scalar loops; cpu)", "optimized"};
constexpr EngineFlagHelp kBackendHelp = {"cpu | reference (the scalar kernels) | cuda (NVIDIA GPU)",
                                         "cuda if built in and a GPU is present, else cpu"};
constexpr EngineFlagHelp kFp16Help = {"cuda: float16 activations (float32 accumulation)", "off"};
constexpr EngineFlagHelp kThreadsHelp = {"cpu: threads sharing each chunk's work (1..16)", "1"};

enum class FlagResult { not_mine, taken, bad };

// The option `a` (long or short name) with its value v (null: none; --fp16
// takes none), if it is one of these: taken, or bad with *why set to the
// usage error. keyword_spotter's parser, which reads --name=value too, calls
// it with the value it found; mega_rtf's through take_engine_flag.
inline FlagResult set_engine_flag(const char* a, const char* v, EngineFlags* f, const char** why) {
  auto is = [&](const char* name) { return std::strcmp(a, name) == 0; };
  auto bad = [&](const char* msg) {
    *why = msg;
    return FlagResult::bad;
  };
  if (is("--fp16")) {
    f->fp16 = true;
    return FlagResult::taken;
  }
  if (is("-k") || is("--kernels")) {
    if (!v || (std::strcmp(v, "optimized") != 0 && std::strcmp(v, "reference") != 0)) {
      return bad("--kernels must be 'optimized' or 'reference'");
    }
    f->kernels = v;
  } else if (is("--backend")) {
    if (!v || (std::strcmp(v, "cpu") != 0 && std::strcmp(v, "reference") != 0 && std::strcmp(v, "cuda") != 0)) {
      return bad("--backend must be 'cpu', 'reference' or 'cuda'");
    }
    f->backend = v;
  } else if (is("-t") || is("--threads")) {
    int64_t n = 0;
    if (!v || !parse_int(v, 1, mega::kMaxThreads, &n)) return bad("--threads needs an integer in [1, 16]");
    f->threads = int(n);
  } else {
    return FlagResult::not_mine;
  }
  return FlagResult::taken;
}

// argv[*i], if it is one of these options (its value, argv[*i + 1], is
// consumed too): taken, or bad with *why set to the usage error.
inline FlagResult take_engine_flag(int argc, char** argv, int* i, EngineFlags* f, const char** why) {
  const FlagResult r = set_engine_flag(argv[*i], *i + 1 < argc ? argv[*i + 1] : nullptr, f, why);
  if (r == FlagResult::taken && std::strcmp(argv[*i], "--fp16") != 0) ++*i;
  return r;
}

// The combination the backends refuse, as a usage error; null if none.
inline const char* engine_flags_conflict(const EngineFlags& f) {
  if (f.backend == "cuda" && f.kernels == "reference") return "--kernels reference is for the cpu backend";
  if (f.fp16 && (f.backend == "cpu" || f.backend == "reference")) return "--fp16 needs the cuda backend";
  return nullptr;
}

// With no --backend: cuda when --fp16 asks for it, cpu for the reference
// kernels, else cuda when built in and a GPU is present, else cpu.
inline void resolve_backend(EngineFlags* f) {
  if (f->backend.empty()) f->backend = f->fp16 ? "cuda" : f->kernels == "reference" ? "cpu" : mega::default_backend();
}

inline mega::EngineOptions engine_options(const EngineFlags& f, int64_t max_clip_samples) {
  mega::EngineOptions opts;
  opts.kernels = f.kernels == "reference" ? mega::KernelImpl::reference : mega::KernelImpl::optimized;
  opts.max_clip_samples = max_clip_samples;
  opts.fp16 = f.fp16;
  opts.n_threads = f.threads;
  return opts;
}

}  // namespace kws
