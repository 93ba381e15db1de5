// PortAudio's input devices: listing them (devices, and the errors of
// listen) and finding the one --device names. Call between Pa_Initialize and
// Pa_Terminate.
#pragma once

#include <portaudio.h>

#include <cstdio>
#include <string>

namespace kws {

const char* host_api_name(const PaDeviceInfo* d);
int count_input_devices();
// One line per input device ('*' marks the default input), or one JSON object per line.
void print_input_devices(FILE* out, bool json);
// The device `want` names (empty: the default input; digits: an index;
// otherwise a case-insensitive substring of the name, an exact name
// winning), or paNoDevice after printing why and the devices there are.
PaDeviceIndex find_input_device(const std::string& want);

}  // namespace kws
