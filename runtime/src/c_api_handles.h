// SPDX-License-Identifier: Apache-2.0
// What the C API's opaque handles (mega/mega_kws.h) hold. Private: shared by
// the C API (c_api.cpp) and the microphone's C API (mega/mega_kws_audio.h,
// apps/audio/mic_c_api.cpp), which is built from the same tree and links this
// very libmega_kws, so it may look inside a model, session or detector.
#pragma once

#include <cstdint>
#include <memory>

#include "mega/detector.hpp"
#include "mega/engine.hpp"
#include "mega/keyword_stream.hpp"
#include "mega/mega.hpp"
#include "mega/mega_kws.h"

struct mega_model {
  std::shared_ptr<const mega::Model> model;
};

// Every C session is an engine (mega/engine.hpp) on the backend its options
// name, streamed with a detector through the core's keyword stream.
struct mega_session {
  explicit mega_session(std::unique_ptr<mega::Engine> e) : session(std::move(e)), stream(*session) {}
  std::unique_ptr<mega::Engine> session;
  mega::KeywordStream stream;
};

struct mega_detector {
  std::shared_ptr<const mega::Model> model;  // keeps the label texts alive
  std::unique_ptr<mega::Detector> detector;
  mega::DetectorConfig config;
};
