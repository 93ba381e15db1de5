// SPDX-License-Identifier: Apache-2.0
#include "watchdog.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace kws {

Watchdog::Watchdog(double seconds, int exit_code, const char* what) {
  thread_ = std::thread([this, seconds, exit_code, what] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
      std::fprintf(stderr, "\nkeyword_spotter: %s did not finish within %.0f s (is the sound server hung?); "
                   "exiting\n", what, seconds);
      std::fflush(stderr);
      std::_Exit(exit_code);
    }
  });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace kws
