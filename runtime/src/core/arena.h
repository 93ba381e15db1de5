// SPDX-License-Identifier: Apache-2.0
// Carves one allocation into 64-byte aligned arrays: run a layout once over an
// Arena without memory to size the block, then again over the block to hand
// out the pointers. How sessions and backends allocate everything at
// creation, in one piece.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mega {

class Arena {
 public:
  explicit Arena(uint8_t* base) : base_(base) {}
  template <typename T>
  T* take(int64_t count) {
    off_ = (off_ + 63) & ~size_t(63);
    T* p = base_ ? reinterpret_cast<T*>(base_ + off_) : nullptr;
    off_ += sizeof(T) * size_t(count);
    return p;
  }
  size_t size() const { return off_; }

 private:
  uint8_t* base_;
  size_t off_ = 0;
};

}  // namespace mega
