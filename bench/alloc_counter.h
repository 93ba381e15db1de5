// SPDX-License-Identifier: Apache-2.0
// Counts heap allocations (the malloc family and operator new, from any
// thread) made while counting is on. Link alloc_counter.cpp into a binary of
// its own: it replaces the process's malloc (or, under AddressSanitizer,
// installs the sanitizer's allocation hook instead). Used by the benchmarks
// and by the tests that count allocations per chunk.
#pragma once

#include <cstdint>

namespace mega_alloc {

void set_alloc_counting(bool on);
int64_t alloc_count();  // allocations counted so far

// Allocations made by f().
template <typename F>
int64_t allocations_in(F&& f) {
  const int64_t before = alloc_count();
  set_alloc_counting(true);
  f();
  set_alloc_counting(false);
  return alloc_count() - before;
}

}  // namespace mega_alloc
