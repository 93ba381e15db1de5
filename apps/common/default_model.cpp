// SPDX-License-Identifier: Apache-2.0
// The model used without -m (default_model.h).
#include "default_model.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdlib>

namespace kws {

namespace {

constexpr char kDemoModel[] = "models/sc10-demo.mega";  // in the source tree and under share/mega_kws

bool is_file(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : std::string();
}

// This program's directory, links resolved; empty if unknown.
std::string program_dir() {
  const std::string exe = real_path("/proc/self/exe");
  const size_t slash = exe.rfind('/');
  return slash == std::string::npos ? std::string() : exe.substr(0, slash);
}

}  // namespace

std::string default_model_path(std::string* tried) {
  const char* env = std::getenv("MEGA_KWS_MODEL");
  if (env && *env) return env;
  *tried = "$MEGA_KWS_MODEL (not set)";
  const std::string dir = program_dir();
  if (dir.empty()) return std::string();
  const std::string installed = dir + "/" MEGA_BIN_TO_DATA "/" + kDemoModel;
  *tried += ", " + installed;
  if (is_file(installed)) return installed;
  const std::string build_dir = real_path(MEGA_BUILD_DIR);
  if (!build_dir.empty() && (dir == build_dir || dir.compare(0, build_dir.size() + 1, build_dir + "/") == 0)) {
    const std::string source = std::string(MEGA_SOURCE_DIR "/") + kDemoModel;
    *tried += ", " + source;
    if (is_file(source)) return source;
  }
  return std::string();
}

}  // namespace kws
