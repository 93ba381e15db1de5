// SPDX-License-Identifier: Apache-2.0
// A lock-free single-producer/single-consumer ring of fixed-size frames, for
// handing audio from the capture callback to the inference thread (the
// pattern of PortAudio's pa_ringbuffer). All memory is allocated by the
// constructor; write() and read() never allocate, lock or block, so the
// producer may be a real-time audio callback. When the ring is full, write()
// drops what does not fit and counts it (overflow), rather than waiting.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace kws {

template <typename T>
class SpscRing {
  static_assert(std::is_trivially_copyable<T>::value, "frames are copied with memcpy");
  static_assert(std::atomic<size_t>::is_always_lock_free, "the indices must be lock-free");
  static_assert(std::atomic<uint64_t>::is_always_lock_free, "the overflow counter must be lock-free");

 public:
  // Room for at least min_frames frames (rounded up to a power of two) of
  // frame_size elements each (e.g. the channel count for interleaved audio).
  explicit SpscRing(size_t min_frames, size_t frame_size = 1)
      : frame_size_(frame_size < 1 ? 1 : frame_size) {
    size_t cap = 1;
    while (cap < min_frames) cap <<= 1;
    capacity_ = cap;
    mask_ = cap - 1;
    data_.assign(capacity_ * frame_size_, T());
  }
  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  size_t capacity() const { return capacity_; }      // frames
  size_t frame_size() const { return frame_size_; }  // elements per frame

  // Producer only. Copies up to n frames; returns how many were written. The
  // rest are dropped and added to overflow_frames().
  size_t write(const T* src, size_t n) {
    const size_t w = write_.load(std::memory_order_relaxed);
    const size_t r = read_.load(std::memory_order_acquire);  // the consumer is done with frames before r
    const size_t n_write = std::min(n, capacity_ - (w - r));
    copy_in(w, src, n_write);
    write_.store(w + n_write, std::memory_order_release);  // publishes the copied frames
    if (n_write < n) {
      overflow_.store(overflow_.load(std::memory_order_relaxed) + (n - n_write), std::memory_order_relaxed);
    }
    return n_write;
  }

  // Consumer only. Copies up to max frames into dst; returns how many.
  size_t read(T* dst, size_t max) {
    const size_t r = read_.load(std::memory_order_relaxed);
    const size_t w = write_.load(std::memory_order_acquire);  // frames before w are fully written
    const size_t n = std::min(max, w - r);
    copy_out(r, dst, n);
    read_.store(r + n, std::memory_order_release);  // hands the slots back to the producer
    return n;
  }

  // Either side; a snapshot that may be stale by the time it is used.
  size_t read_available() const {
    return write_.load(std::memory_order_acquire) - read_.load(std::memory_order_acquire);
  }
  size_t write_available() const { return capacity_ - read_available(); }
  uint64_t overflow_frames() const { return overflow_.load(std::memory_order_relaxed); }

 private:
  // Indices count frames since creation and wrap modulo 2^bits; since the
  // capacity is a power of two, (index & mask_) stays consistent across the wrap.
  void copy_in(size_t w, const T* src, size_t n) {
    const size_t start = w & mask_;
    const size_t first = std::min(n, capacity_ - start);
    std::memcpy(&data_[start * frame_size_], src, first * frame_size_ * sizeof(T));
    if (n > first) std::memcpy(&data_[0], src + first * frame_size_, (n - first) * frame_size_ * sizeof(T));
  }
  void copy_out(size_t r, T* dst, size_t n) {
    const size_t start = r & mask_;
    const size_t first = std::min(n, capacity_ - start);
    std::memcpy(dst, &data_[start * frame_size_], first * frame_size_ * sizeof(T));
    if (n > first) std::memcpy(dst + first * frame_size_, &data_[0], (n - first) * frame_size_ * sizeof(T));
  }

  size_t frame_size_ = 1;
  size_t capacity_ = 1;
  size_t mask_ = 0;
  std::vector<T> data_;
  // Separate cache lines: the producer writes write_ and overflow_, the consumer read_.
  alignas(64) std::atomic<size_t> write_{0};
  alignas(64) std::atomic<uint64_t> overflow_{0};
  alignas(64) std::atomic<size_t> read_{0};
};

}  // namespace kws
