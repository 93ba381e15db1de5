// SPDX-License-Identifier: Apache-2.0
#include "stop_signals.h"

#include <cstring>

namespace kws {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
void on_stop_signal(int sig) { g_stop_signal = sig; }

}  // namespace

StopSignals::StopSignals() {
  g_stop_signal = 0;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

const volatile std::sig_atomic_t* StopSignals::flag() { return &g_stop_signal; }

}  // namespace kws
