// SPDX-License-Identifier: Apache-2.0
// Whether what a program wrote to stdout arrived (a full disk, a closed pipe
// lose it silently otherwise): keyword_spotter and mega_rtf report it the same
// way, one line and exit 1.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kws {

// The first failed write's errno (0: none so far).
inline int& stdout_errno() {
  static int e = 0;
  return e;
}

// Flushes stdout: false if anything written to it so far was lost,
// remembering the first error for check_stdout().
inline bool stdout_ok() {
  errno = 0;
  const bool ok = std::fflush(stdout) == 0 && !std::ferror(stdout);
  if (!ok && stdout_errno() == 0) stdout_errno() = errno ? errno : EIO;
  return ok;
}

// At exit: rc, or 1 (when rc was 0) with "PROGRAM: cannot write the output:
// WHY" on stderr if the results written to stdout did not all arrive.
inline int check_stdout(const char* program, int rc) {
  if (stdout_ok()) return rc;
  std::fprintf(stderr, "%s: cannot write the output: %s\n", program, std::strerror(stdout_errno()));
  return rc == 0 ? 1 : rc;
}

}  // namespace kws
