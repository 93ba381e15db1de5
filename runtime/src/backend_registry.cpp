// SPDX-License-Identifier: Apache-2.0
// The registry of backends (core/backend.h): the CPU backend, linked into the
// core and registered first (its entry point, cpu_backend_entry); those the
// program registered; and, in libmega_kws.so (MEGA_BACKEND_MODULES), the
// modules it loads on first use. Compiled twice: into the static runtime (no
// module loading: a module must share the runtime of libmega_kws.so) and into
// libmega_kws.so.
#include "backend_registry.h"

#include <cstring>
#include <mutex>

// The one module this project builds: the CUDA backend (-DMEGA_CUDA=ON).
#if defined(MEGA_BACKEND_MODULES) && defined(MEGA_CUDA_MODULE)
#define MEGA_LOADS_CUDA_MODULE 1
#endif

#if defined(MEGA_LOADS_CUDA_MODULE)
#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#endif

namespace mega {

namespace {

// Backends by name: the CPU backend, those registered by the program, those
// loaded.
constexpr int kMaxBackends = 8;
std::mutex g_backends_mutex;
const BackendInterface* g_backends[kMaxBackends] = {};
bool g_builtins_registered = false;

const BackendInterface* registered(const std::string& name) {
  for (const BackendInterface* b : g_backends) {
    if (b && name == b->name) return b;
  }
  return nullptr;
}

bool add_backend(const BackendInterface* backend) {
  if (!backend || !backend->name || !backend->available || !backend->create_engine ||
      !backend->create_batch_engine || registered(backend->name)) {
    return false;
  }
  for (const BackendInterface*& slot : g_backends) {
    if (!slot) {
      slot = backend;
      return true;
    }
  }
  return false;
}

// The backends linked into the core, registered before any other (under the
// lock): a program cannot take their names.
void register_builtins() {
  if (g_builtins_registered) return;
  g_builtins_registered = true;
  add_backend(cpu_backend_entry());
  add_backend(reference_backend_entry());
}

#if defined(MEGA_LOADS_CUDA_MODULE)
// Where backend modules are: MEGA_KWS_BACKEND_DIR if set, else the directory
// of this library (they are installed beside it).
std::string module_dir() {
  if (const char* env = std::getenv("MEGA_KWS_BACKEND_DIR")) return env;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&register_backend), &info) == 0 || !info.dli_fname) return ".";
  const std::string self = info.dli_fname;
  const size_t slash = self.rfind('/');
  return slash == std::string::npos ? "." : self.substr(0, slash);
}

// An NVIDIA driver with at least one device, asked without loading the CUDA
// backend (whose cuBLAS alone is some 200 MB resident).
bool gpu_present(std::string* why) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    *why = "no NVIDIA driver (libcuda.so.1 cannot be loaded)";
    return false;
  }
  using Init = int (*)(unsigned);
  using Count = int (*)(int*);
  const auto init = reinterpret_cast<Init>(dlsym(driver, "cuInit"));
  const auto count = reinterpret_cast<Count>(dlsym(driver, "cuDeviceGetCount"));
  int n = 0;
  if (!init || !count || init(0) != 0 || count(&n) != 0 || n < 1) {
    *why = "no CUDA device (the NVIDIA driver found none)";
    dlclose(driver);
    return false;
  }
  return true;  // the driver stays loaded: the backend will use it
}

// Loads the CUDA backend's module, and registers it.
const BackendInterface* load_cuda_module(std::string* why) {
  const std::string path = module_dir() + "/libmega_kws_cuda.so";
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) {
    *why = "the CUDA backend module " + path + " is missing (install it beside libmega_kws.so, or set "
           "MEGA_KWS_BACKEND_DIR to its directory)";
    return nullptr;
  }
  if (!gpu_present(why)) return nullptr;
  void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!module) {
    const char* e = dlerror();
    *why = "the CUDA backend module cannot be loaded: " + std::string(e ? e : path);
    return nullptr;
  }
  const auto entry = reinterpret_cast<BackendEntry>(dlsym(module, kBackendEntry));
  const BackendInterface* b = entry ? entry() : nullptr;
  const bool ours = b && b->abi && std::strcmp(b->abi, MEGA_KWS_VERSION_STRING) == 0 && b->name &&
                    std::strcmp(b->name, "cuda") == 0;
  if (!ours || !add_backend(b)) {
    *why = path + " is not a CUDA backend module of this version (" MEGA_KWS_VERSION_STRING ")";
    dlclose(module);
    return nullptr;
  }
  return b;  // the module stays loaded for the life of the process
}
#endif

// Why a backend name is not served when nothing registered it and it cannot be loaded.
std::string not_built(const std::string& name) {
  if (name != "cuda") return "unknown backend '" + name + "' (cpu, cuda)";
#if defined(MEGA_BACKEND_MODULES) || !defined(MEGA_CUDA_MODULE)
  return "this build has no CUDA backend (configure with -DMEGA_CUDA=ON)";
#else
  return "this program links the static runtime, which loads no backend module: link libmega_kws "
         "(the CUDA backend is the module libmega_kws_cuda.so beside it)";
#endif
}

}  // namespace

// The backend of that name, registered or (libmega_kws.so) loaded now.
const BackendInterface* find_backend(const std::string& name, std::string* why) {
  std::lock_guard<std::mutex> lock(g_backends_mutex);
  register_builtins();
  if (const BackendInterface* b = registered(name)) return b;
#if defined(MEGA_LOADS_CUDA_MODULE)
  if (name == "cuda") return load_cuda_module(why);
#endif
  *why = not_built(name);
  return nullptr;
}

bool register_backend(const BackendInterface* backend) {
  std::lock_guard<std::mutex> lock(g_backends_mutex);
  register_builtins();
  return add_backend(backend);
}

}  // namespace mega
