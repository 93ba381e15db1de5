// SPDX-License-Identifier: Apache-2.0
#include "audio_devices.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "json_escape.h"

namespace kws {

namespace {

bool is_input(const PaDeviceInfo* d) { return d && d->maxInputChannels > 0; }

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const char* host_api_name(const PaDeviceInfo* d) {
  const PaHostApiInfo* h = Pa_GetHostApiInfo(d->hostApi);
  return h && h->name ? h->name : "?";
}

int count_input_devices() {
  int n = 0;
  for (PaDeviceIndex i = 0, end = Pa_GetDeviceCount(); i < end; ++i) n += is_input(Pa_GetDeviceInfo(i)) ? 1 : 0;
  return n;
}

namespace {

// printf into a std::string (device names are short; a long one is cut).
template <typename... Args>
void append(std::string* out, const char* fmt, Args... args) {
  char line[512];
  std::snprintf(line, sizeof line, fmt, args...);
  *out += line;
}

int host_api_width() {
  int w = 8;
  for (PaDeviceIndex i = 0, n = Pa_GetDeviceCount(); i < n; ++i) {
    const PaDeviceInfo* d = Pa_GetDeviceInfo(i);
    if (is_input(d)) w = std::max(w, int(std::strlen(host_api_name(d))));
  }
  return w;
}

}  // namespace

std::string input_devices_table() {
  const PaDeviceIndex def = Pa_GetDefaultInputDevice();
  const int api_width = host_api_width();
  std::string out;
  append(&out, "    idx  inputs  default rate  %-*s  name\n", api_width, "host API");
  for (PaDeviceIndex i = 0, n = Pa_GetDeviceCount(); i < n; ++i) {
    const PaDeviceInfo* d = Pa_GetDeviceInfo(i);
    if (!is_input(d)) continue;
    append(&out, "  %c %3d  %6d  %9.0f Hz  %-*s  %s\n", i == def ? '*' : ' ', int(i), d->maxInputChannels,
           d->defaultSampleRate, api_width, host_api_name(d), d->name ? d->name : "");
  }
  out += "  (* = default input)\n";
  return out;
}

void print_input_devices(FILE* out, bool json) {
  if (!json) {
    std::fputs(input_devices_table().c_str(), out);
    return;
  }
  const PaDeviceIndex def = Pa_GetDefaultInputDevice();
  for (PaDeviceIndex i = 0, n = Pa_GetDeviceCount(); i < n; ++i) {
    const PaDeviceInfo* d = Pa_GetDeviceInfo(i);
    if (!is_input(d)) continue;
    std::fprintf(out,
                 "{\"index\": %d, \"name\": \"%s\", \"host_api\": \"%s\", \"max_input_channels\": %d, "
                 "\"default_sample_rate\": %.0f, \"default\": %s}\n",
                 int(i), json_escape(d->name ? d->name : "").c_str(), json_escape(host_api_name(d)).c_str(),
                 d->maxInputChannels, d->defaultSampleRate, i == def ? "true" : "false");
  }
}

namespace {

// Why, and the devices there are: one line when there are none (the usual case on a machine without sound).
std::string device_error(const std::string& why, const char* no_devices) {
  if (count_input_devices() == 0) return why + ": " + no_devices;
  std::string table = input_devices_table();
  table.pop_back();  // the caller ends the message
  return why + "\ninput devices:\n" + table;
}

}  // namespace

PaDeviceIndex find_input_device(const std::string& want, const char* no_devices, std::string* error,
                                std::string* note) {
  const PaDeviceIndex n = Pa_GetDeviceCount();
  if (want.empty()) {
    const PaDeviceIndex def = Pa_GetDefaultInputDevice();
    if (def == paNoDevice || !is_input(Pa_GetDeviceInfo(def))) {
      *error = device_error("there is no default input device", no_devices);
      return paNoDevice;
    }
    return def;
  }
  if (std::all_of(want.begin(), want.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    const long idx = want.size() <= 9 ? std::strtol(want.c_str(), nullptr, 10) : -1;
    if (idx < 0 || idx >= long(n) || !is_input(Pa_GetDeviceInfo(PaDeviceIndex(idx)))) {
      *error = device_error("device " + want + " is not an input device", no_devices);
      return paNoDevice;
    }
    return PaDeviceIndex(idx);
  }
  const std::string needle = lower(want);
  PaDeviceIndex found = paNoDevice;
  int n_matches = 0;
  for (PaDeviceIndex i = 0; i < n; ++i) {
    const PaDeviceInfo* d = Pa_GetDeviceInfo(i);
    if (!is_input(d) || !d->name) continue;
    const std::string name = lower(d->name);
    if (name.find(needle) == std::string::npos) continue;
    // An exact name wins over substrings; otherwise the first match.
    if (name == needle) {
      found = i;
      n_matches = 1;
      break;
    }
    if (n_matches++ == 0) found = i;
  }
  if (found == paNoDevice) {
    *error = device_error("no input device matches '" + want + "'", no_devices);
    return paNoDevice;
  }
  if (n_matches > 1) {
    *note = std::to_string(n_matches) + " input devices match '" + want + "'; using the first, " +
            std::to_string(int(found)) + " '" + Pa_GetDeviceInfo(found)->name + "'";
  }
  return found;
}

}  // namespace kws

namespace kws {

namespace {

// Found at run time: PortAudio's build decides whether ALSA and JACK are there.
void drop_alsa_message(const char*, int, const char*, int, const char*, ...) {}
void drop_jack_message(const char*) {}

}  // namespace

void set_audio_library_messages(bool show) {
  if (show) return;
  using AlsaHandler = void (*)(const char*, int, const char*, int, const char*, ...);
  using JackHandler = void (*)(const char*);
  if (void* f = dlsym(RTLD_DEFAULT, "snd_lib_error_set_handler")) {
    reinterpret_cast<int (*)(AlsaHandler)>(f)(&drop_alsa_message);
  }
  for (const char* name : {"jack_set_error_function", "jack_set_info_function"}) {
    if (void* f = dlsym(RTLD_DEFAULT, name)) reinterpret_cast<void (*)(JackHandler)>(f)(&drop_jack_message);
  }
}

}  // namespace kws
