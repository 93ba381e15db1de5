// SPDX-License-Identifier: Apache-2.0
// Exits the process if a PortAudio call has not returned in time: a wedged
// sound server or driver (PortAudio and ALSA have no timeouts of their own)
// must not turn into a hung keyword_spotter.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>

namespace kws {

class Watchdog {
 public:
  // After `seconds` without the Watchdog being destroyed, prints that `what`
  // did not finish and exits with exit_code.
  Watchdog(double seconds, int exit_code, const char* what);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace kws
