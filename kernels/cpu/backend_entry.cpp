// The CPU backend's entry point (backend.h): the table that the core's
// registry registers on first use, as it registers a program's or a loaded
// module's (backend_registry.cpp). Linked into the core library.
#include "backend.h"
#include "cpu/cpu_engine.h"

namespace {

bool cpu_available(std::string* why) {
  if (why) *why = "cpu";
  return true;
}

const mega::BackendInterface kCpuBackend = [] {
  mega::BackendInterface b;
  b.abi = MEGA_KWS_VERSION_STRING;
  b.name = "cpu";
  b.available = cpu_available;
  b.create_engine = mega::cpu::create_cpu_engine;
  b.create_batch_engine = mega::cpu::create_cpu_batch_engine;
  return b;
}();

}  // namespace

const mega::BackendInterface* mega::cpu_backend_entry() { return &kCpuBackend; }
