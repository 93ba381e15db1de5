// SPDX-License-Identifier: Apache-2.0
// Where the audio comes from: a file (scan), the microphone (listen), or
// memory (tests). Every source hands its frames to the consumer through an
// SPSC ring (spsc_ring.h), and one consumer path, StreamPipeline
// (stream_pipeline.h), takes them from the ring through the session and the
// detector to the output, whatever the source; so the file and the tests
// drive the very path the microphone does. (TFLite Micro's audio provider,
// with PortAudio's ring.)
//
// A live source fills its ring from its own thread (the microphone: the
// capture callback, which only copies); a source that has its frames at hand
// fills it on the consumer's thread, in poll().
#pragma once

#include <string>

#include "spsc_ring.h"

namespace kws {

struct AudioFormat {
  int channels = 1;   // 1, or 2 (the consumer averages them); interleaved in the ring
  double rate = 0.0;  // frames per second (the consumer resamples to the model's rate)
};

enum class SourceState {
  running,  // frames are in the ring or will come
  ended,    // no frame will come after those in the ring (the end of a file)
  failed,   // no frame will come, because of an error (error() says which)
};

class AudioSource {
 public:
  virtual ~AudioSource() = default;
  virtual AudioFormat format() const = 0;
  // The ring the frames arrive in, format().channels floats per frame; read
  // only by the consumer.
  virtual SpscRing<float>& ring() = 0;
  // The consumer calls this before each read from the ring: a source that
  // produces on the consumer's thread refills the ring here; a live one
  // checks that it is still delivering. Never blocks for long.
  virtual SourceState poll() = 0;
  // Why poll() said failed.
  virtual const std::string& error() const = 0;

 protected:
  AudioSource() = default;
  AudioSource(const AudioSource&) = delete;
  AudioSource& operator=(const AudioSource&) = delete;
};

}  // namespace kws
