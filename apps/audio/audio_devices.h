// PortAudio's input devices: listing them (devices, and the errors of
// listen) and finding the one --device names. Call between Pa_Initialize and
// Pa_Terminate.
#pragma once

#include <portaudio.h>

#include <cstdio>
#include <string>

namespace kws {

// Why there may be none, and how to see more.
constexpr const char* kNoInputDevices =
    "no audio input devices (is a sound server running? --verbose shows ALSA's and JACK's own messages)";

const char* host_api_name(const PaDeviceInfo* d);
int count_input_devices();
// One line per input device ('*' marks the default input), or one JSON object per line.
void print_input_devices(FILE* out, bool json);
// The device `want` names (empty: the default input; digits: an index;
// otherwise a case-insensitive substring of the name, an exact name
// winning), or paNoDevice after printing why and the devices there are.
PaDeviceIndex find_input_device(const std::string& want);

}  // namespace kws

namespace kws {

// ALSA and JACK print pages of their own diagnostics on stderr when there is
// no sound card or server (about a hundred lines before the program's one-line
// error). Unless show (--verbose), this hands both libraries a handler that
// drops them; call it before Pa_Initialize. The program's own messages, the
// watchdog's included, still reach stderr.
void set_audio_library_messages(bool show);

}  // namespace kws
