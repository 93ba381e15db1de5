// SPDX-License-Identifier: Apache-2.0
// SIGINT and SIGTERM while listening: they only set a flag, which the
// consumer loop checks (StreamOptions::stop); the previous handlers come back
// when the StopSignals goes.
#pragma once

#include <signal.h>

#include <csignal>

namespace kws {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Non-zero (the signal's number) once one arrived.
  static const volatile std::sig_atomic_t* flag();

 private:
  struct sigaction old_int_, old_term_;
};

}  // namespace kws
