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

// One line per input device; '*' marks the default input.
void print_input_devices(FILE* out, bool json) {
  const PaDeviceIndex def = Pa_GetDefaultInputDevice();
  const PaDeviceIndex n = Pa_GetDeviceCount();
  int api_width = 8;
  for (PaDeviceIndex i = 0; i < n; ++i) {
    const PaDeviceInfo* d = Pa_GetDeviceInfo(i);
    if (is_input(d)) api_width = std::max(api_width, int(std::strlen(host_api_name(d))));
  }
  if (!json) std::fprintf(out, "    idx  inputs  default rate  %-*s  name\n", api_width, "host API");
  for (PaDeviceIndex i = 0; i < n; ++i) {
    const PaDeviceInfo* d = Pa_GetDeviceInfo(i);
    if (!is_input(d)) continue;
    const char* name = d->name ? d->name : "";
    if (json) {
      std::fprintf(out,
                   "{\"index\": %d, \"name\": \"%s\", \"host_api\": \"%s\", \"max_input_channels\": %d, "
                   "\"default_sample_rate\": %.0f, \"default\": %s}\n",
                   int(i), json_escape(name).c_str(), json_escape(host_api_name(d)).c_str(), d->maxInputChannels,
                   d->defaultSampleRate, i == def ? "true" : "false");
    } else {
      std::fprintf(out, "  %c %3d  %6d  %9.0f Hz  %-*s  %s\n", i == def ? '*' : ' ', int(i), d->maxInputChannels,
                   d->defaultSampleRate, api_width, host_api_name(d), name);
    }
  }
  if (!json) std::fprintf(out, "  (* = default input)\n");
}

namespace {

void print_device_error_list(const char* why) {
  if (count_input_devices() == 0) {  // one line: the usual case on a machine without sound
    std::fprintf(stderr, "keyword_spotter: %s: %s\n", why, kNoInputDevices);
  } else {
    std::fprintf(stderr, "keyword_spotter: %s\n", why);
    std::fprintf(stderr, "input devices:\n");
    print_input_devices(stderr, false);
  }
}

}  // namespace

PaDeviceIndex find_input_device(const std::string& want) {
  const PaDeviceIndex n = Pa_GetDeviceCount();
  if (want.empty()) {
    const PaDeviceIndex def = Pa_GetDefaultInputDevice();
    if (def == paNoDevice || !is_input(Pa_GetDeviceInfo(def))) {
      print_device_error_list("there is no default input device");
      return paNoDevice;
    }
    return def;
  }
  if (std::all_of(want.begin(), want.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    const long idx = want.size() <= 9 ? std::strtol(want.c_str(), nullptr, 10) : -1;
    if (idx < 0 || idx >= long(n) || !is_input(Pa_GetDeviceInfo(PaDeviceIndex(idx)))) {
      const std::string why = "device " + want + " is not an input device";
      print_device_error_list(why.c_str());
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
    const std::string why = "no input device matches '" + want + "'";
    print_device_error_list(why.c_str());
    return paNoDevice;
  }
  if (n_matches > 1) {
    std::fprintf(stderr, "keyword_spotter: %d input devices match '%s'; using the first, %d '%s'\n", n_matches,
                 want.c_str(), int(found), Pa_GetDeviceInfo(found)->name);
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
