// SPDX-License-Identifier: Apache-2.0
// devices: the audio input devices PortAudio sees, one per line (or one JSON
// object per device; none: one object with an empty "devices" list and the error).
#include <portaudio.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "audio_devices.h"
#include "cli_output.h"
#include "commands.h"
#include "watchdog.h"

namespace kws {

namespace {

constexpr double kStartTimeout = 10.0;  // opening the audio system (a hung sound server blocks it)

// No list: one line on stderr, and with --json one object on stdout, so that a
// tool always reads something: {"devices": [], "error": why}.
int no_devices(const Params& p, const std::string& why) {
  std::fprintf(stderr, "keyword_spotter: %s\n", why.c_str());
  if (p.json) JsonLine().raw("devices", "[]").str("error", why).end();
  return kExitDevice;
}

}  // namespace

int cmd_devices(const Params& p) {
  // A keyword spotter must not start a JACK server as a side effect.
  setenv("JACK_NO_START_SERVER", "1", 0);
  Watchdog watchdog(kStartTimeout, kExitDevice, "listing the audio devices");
  set_audio_library_messages(p.verbose);
  const PaError e = Pa_Initialize();
  if (e != paNoError) return no_devices(p, std::string("cannot initialize PortAudio: ") + Pa_GetErrorText(e));
  int rc = kExitOk;
  if (Pa_GetDeviceCount() < 0) {
    rc = no_devices(p, std::string("cannot list audio devices: ") + Pa_GetErrorText(Pa_GetDeviceCount()));
  } else if (count_input_devices() == 0) {
    rc = no_devices(p, kNoInputDevices);
  } else {
    print_input_devices(stdout, p.json);
    std::fflush(stdout);
  }
  Pa_Terminate();
  return rc;
}

}  // namespace kws
