// SPDX-License-Identifier: Apache-2.0
// The microphone's C API (mega/mega_kws_audio.h) where no sound card is
// needed: bad arguments give a status and a message, never a crash; with no
// sound system at all, listing gives no device and opening fails at once with
// MEGA_ERR_NO_DEVICE and a one-line reason. (With a sound server, the
// detections themselves: tests/test_python_listen.py.) A binary of its own:
// it links libmega_kws_audio, hence PortAudio, as its users do.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "mega/mega_kws.h"
#include "mega/mega_kws_audio.h"

namespace {

std::string fixture(const char* name) { return std::string(MEGA_FIXTURES) + "/" + name; }

// A model with its session and detector, freed in order.
struct Stream {
  explicit Stream(const std::string& path) {
    model = mega_model_load(path.c_str(), nullptr);
    if (!model) return;
    session = mega_session_create(model, nullptr);
    detector = mega_detector_create(model, nullptr, nullptr);
  }
  ~Stream() {
    mega_detector_free(detector);
    mega_session_free(session);
    mega_model_free(model);
  }
  mega_model* model = nullptr;
  mega_session* session = nullptr;
  mega_detector* detector = nullptr;
};

// No sound server to be found (PulseAudio's socket and JACK's server point
// nowhere, none is started), as in CI; false where this machine has sound
// cards of its own (ALSA would list them).
bool no_sound_system() {
  setenv("PULSE_SERVER", "unix:/nonexistent/mega_kws_test/native", 1);
  setenv("PULSE_RUNTIME_PATH", "/nonexistent/mega_kws_test", 1);
  setenv("JACK_NO_START_SERVER", "1", 1);
  setenv("JACK_DEFAULT_SERVER", "mega_kws_test_none", 1);
  unsetenv("ALSA_CONFIG_PATH");
  mega_audio_silence_library_messages();
  std::ifstream cards("/proc/asound/cards");
  std::string first;
  return !std::getline(cards, first) || first.find("no soundcards") != std::string::npos;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST(AudioCApi, BadArgumentsGiveAStatusAndAMessage) {
  Stream s(fixture("tiny_uni.mega"));
  ASSERT_NE(s.detector, nullptr);
  mega_status st = MEGA_OK;
  EXPECT_EQ(mega_mic_open(nullptr, s.detector, nullptr, &st), nullptr);
  EXPECT_EQ(st, MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(mega_audio_error(), "null session or detector");

  mega_mic_options o;
  mega_mic_options_init(&o);
  o.struct_size = 4;  // a caller that did not call _init()
  EXPECT_EQ(mega_mic_open(s.session, s.detector, &o, &st), nullptr);
  EXPECT_EQ(st, MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mega_audio_error()).find("mega_mic_options_init"), std::string::npos) << mega_audio_error();

  Stream other(std::string(MEGA_MODELS) + "/sc10-demo.mega");  // other labels
  ASSERT_NE(other.detector, nullptr);
  EXPECT_EQ(mega_mic_open(s.session, other.detector, nullptr, &st), nullptr);
  EXPECT_EQ(st, MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mega_audio_error()).find("another model"), std::string::npos) << mega_audio_error();

  Stream bi(fixture("tiny_bi.mega"));
  ASSERT_NE(bi.detector, nullptr);
  EXPECT_EQ(mega_mic_open(bi.session, bi.detector, nullptr, &st), nullptr);
  EXPECT_EQ(st, MEGA_ERR_NOT_STREAMABLE);
  EXPECT_NE(std::string(mega_audio_error()).find("bidirectional"), std::string::npos) << mega_audio_error();

  mega_detection found[1];
  int32_t n = -1;
  EXPECT_EQ(mega_mic_read(nullptr, found, 1, 10, &n), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(n, 0);
  EXPECT_EQ(mega_mic_stats(nullptr, nullptr, nullptr), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_mic_device(nullptr, nullptr, nullptr, nullptr), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_audio_input_devices(nullptr, 1, &n), MEGA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mega_audio_input_devices(nullptr, 0, nullptr), MEGA_ERR_INVALID_ARGUMENT);
  mega_mic_close(nullptr);  // nothing
}

TEST(AudioCApi, NoSoundSystemIsNoDeviceAtOnce) {
  if (!no_sound_system()) GTEST_SKIP() << "this machine has sound cards";
  int32_t n = -1;
  mega_audio_device dev[4];
  ASSERT_EQ(mega_audio_input_devices(dev, 4, &n), MEGA_OK) << mega_audio_error();
  EXPECT_EQ(n, 0);

  Stream s(std::string(MEGA_MODELS) + "/sc10-demo.mega");
  ASSERT_NE(s.detector, nullptr);
  for (const char* device : {static_cast<const char*>(nullptr), "no-such-device-xyz", "7"}) {
    mega_mic_options o;
    mega_mic_options_init(&o);
    o.device = device;
    mega_status st = MEGA_OK;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(mega_mic_open(s.session, s.detector, &o, &st), nullptr);
    EXPECT_LT(seconds_since(t0), 10.0);
    EXPECT_EQ(st, MEGA_ERR_NO_DEVICE) << (device ? device : "(default)");
    const std::string why = mega_audio_error();
    EXPECT_NE(why.find("no audio input devices"), std::string::npos) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << "one line: " << why;
    if (device && device[0] == 'n') {
      EXPECT_NE(why.find("no input device matches 'no-such-device-xyz'"), std::string::npos) << why;
    }
  }
}
