// SPDX-License-Identifier: Apache-2.0
// Audio from a pipe (scan -). Its first bytes say what it is: the magic of a
// container libsndfile reads (WAV, RF64, AIFF, AU, FLAC, Ogg, CAF, ...) or
// anything else, which is raw signed 16-bit little-endian mono at 16 kHz, e.g.
//   arecord -f S16_LE -r 16000 | keyword_spotter scan -m MODEL -
// A container is decoded by the same libsndfile as a file on disk
// (audio_file.cpp), through its virtual I/O: this class presents the pipe as
// a file that can go back anywhere inside the bytes read while libsndfile
// opens it (the header, and the whole stream when it is short), and only
// forward after that, so a stream of any length is read in constant memory.
// Blocking reads: a pipe is waited on; a stop signal (EINTR with *stop set)
// ends the waiting.
#pragma once

#include <sndfile.h>

#include <csignal>
#include <cstdint>
#include <string>
#include <vector>

namespace kws {

class StdinAudio {
 public:
  static constexpr int32_t kRawRate = 16000;
  // Bytes kept while libsndfile reads the header: a short stream is all
  // there, as in a file; a longer one can be read from the start again.
  static constexpr size_t kHeaderBytes = size_t(1) << 20;

  explicit StdinAudio(int fd = 0, const volatile std::sig_atomic_t* stop = nullptr) : fd_(fd), stop_(stop) {}
  // Reads the first bytes: false, with *error set, on a read error.
  bool open(std::string* error);
  // A container for libsndfile (open_sndfile), or else raw s16le (read_raw).
  bool container() const { return container_; }
  // libsndfile on the pipe (sf_open_virtual); null, with *error set, if it
  // cannot decode it. Then the bytes are read forward only.
  SNDFILE* open_sndfile(SF_INFO* sfi, std::string* error);
  // Raw only: up to max_frames mono frames as floats, passed on as they come:
  // the frames read (at least one unless the stream has ended or a stop
  // signal came), 0 at its end, -1 on a read error (*error set).
  int64_t read_raw(float* out, int64_t max_frames, std::string* error);
  // A stop signal interrupted a read (what came before it is valid).
  bool interrupted() const { return interrupted_; }
  // A read error, if any came inside libsndfile's reads.
  const std::string& read_error() const { return read_error_; }

 private:
  // libsndfile's virtual I/O over the pipe
  static sf_count_t vio_filelen(void* self);
  static sf_count_t vio_seek(sf_count_t offset, int whence, void* self);
  static sf_count_t vio_read(void* ptr, sf_count_t count, void* self);
  static sf_count_t vio_tell(void* self);
  bool stopped();                                // a stop signal has come (then interrupted_)
  size_t read_fd(uint8_t* p, size_t n);          // until n bytes, the end, an error or a stop
  bool skip_to(int64_t offset);                  // forward on the pipe to offset (read and kept or dropped)
  size_t read_at_pos(uint8_t* p, size_t n);

  int fd_;
  const volatile std::sig_atomic_t* stop_;
  bool container_ = false, interrupted_ = false, ended_ = false;
  std::string read_error_;
  // the bytes kept from offset 0 (while libsndfile opens the stream, up to
  // kHeaderBytes), then freed once read past
  std::vector<uint8_t> kept_;
  bool keeping_ = true;
  int64_t in_ = 0;   // bytes taken from the pipe
  int64_t pos_ = 0;  // where libsndfile reads next
  // raw: bytes read but not yet decoded (a partial frame)
  std::vector<uint8_t> raw_;
  size_t have_ = 0;
};

}  // namespace kws
