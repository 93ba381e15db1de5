// SPDX-License-Identifier: Apache-2.0
// PortAudio's input devices: listing them (devices, and the errors of
// listen and of the microphone's C API) and finding the one asked for. Call
// between Pa_Initialize and Pa_Terminate. Nothing here prints an error: the
// caller says it (keyword_spotter on stderr, the C API in its error text).
#pragma once

#include <portaudio.h>

#include <cstdio>
#include <string>

namespace kws {

// Why there may be none, and how to see more (keyword_spotter's option).
constexpr const char* kNoInputDevices =
    "no audio input devices (is a sound server running? --verbose shows ALSA's and JACK's own messages)";

const char* host_api_name(const PaDeviceInfo* d);
int count_input_devices();
// One line per input device ('*' marks the default input) under a header line.
std::string input_devices_table();
// input_devices_table(), or one JSON object per line.
void print_input_devices(FILE* out, bool json);
// The device `want` names (empty: the default input; digits: an index;
// otherwise a case-insensitive substring of the name, an exact name
// winning), or paNoDevice with *error saying why and listing the devices
// there are (no_devices: the text for none at all, e.g. kNoInputDevices).
// *note says which one was taken when several names match.
PaDeviceIndex find_input_device(const std::string& want, const char* no_devices, std::string* error,
                                std::string* note);

}  // namespace kws

namespace kws {

// ALSA and JACK print pages of their own diagnostics on stderr when there is
// no sound card or server (about a hundred lines before the program's one-line
// error). Unless show (--verbose), this hands both libraries a handler that
// drops them, process-wide; call it before Pa_Initialize. The program's own
// messages, the watchdog's included, still reach stderr.
void set_audio_library_messages(bool show);

}  // namespace kws
