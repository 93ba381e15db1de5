// devices: the audio input devices PortAudio sees, one per line (or JSON).
#include <portaudio.h>

#include <cstdio>
#include <cstdlib>

#include "audio_devices.h"
#include "commands.h"
#include "watchdog.h"

namespace kws {

namespace {

constexpr double kStartTimeout = 10.0;  // opening the audio system (a hung sound server blocks it)

}  // namespace

int cmd_devices(const Params& p) {
  // A keyword spotter must not start a JACK server as a side effect.
  setenv("JACK_NO_START_SERVER", "1", 0);
  Watchdog watchdog(kStartTimeout, kExitDevice, "listing the audio devices");
  set_audio_library_messages(p.verbose);
  const PaError e = Pa_Initialize();
  if (e != paNoError) {
    std::fprintf(stderr, "keyword_spotter: cannot initialize PortAudio: %s\n", Pa_GetErrorText(e));
    return kExitDevice;
  }
  int rc = kExitOk;
  if (Pa_GetDeviceCount() < 0) {
    std::fprintf(stderr, "keyword_spotter: cannot list audio devices: %s\n", Pa_GetErrorText(Pa_GetDeviceCount()));
    rc = kExitDevice;
  } else if (count_input_devices() == 0) {
    std::fprintf(stderr, "keyword_spotter: %s\n", kNoInputDevices);
    rc = kExitDevice;
  } else {
    print_input_devices(stdout, p.json);
    std::fflush(stdout);
  }
  Pa_Terminate();
  return rc;
}

}  // namespace kws
