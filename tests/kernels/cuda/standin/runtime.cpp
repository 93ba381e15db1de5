// SPDX-License-Identifier: Apache-2.0
// The stand-in's CUDA runtime: memory, streams, events, graphs, errors.
//
// Two modes (cuda_standin::Config, or MEGA_STANDIN_MODE=eager|deferred):
//   eager     stream work runs when it is submitted;
//   deferred  it runs only when the program synchronizes (stream, event,
//             device, or a synchronous call that orders after it), in
//             stream order; a stream does not wait for another (non-blocking
//             streams ignore the legacy default stream, as in CUDA). Until
//             the work that writes them has run, pinned destinations of
//             asynchronous copies hold NaN, and so do the mapped outputs of a
//             graph (learned from its earlier launches): a read before
//             completion shows. An event's first query says "not ready".
// MEGA_STANDIN_INTEGRATED=1 makes the device integrated (mapped host memory,
// as on Jetson); MEGA_STANDIN_SEED picks the thread and block order.
// cudaMalloc'ed memory starts as NaN bytes (0xff), as a stand-in for the
// garbage a real allocation holds.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cuda_runtime.h"
#include "standin_internal.h"

struct Op {
  std::function<cudaError_t()> work;
  std::string what;
  CUevent_st* event = nullptr;  // an event record: completes the event
};

struct CUstream_st {
  unsigned flags = 0;
  int device = 0;
  std::deque<Op> queue;
  // capture
  bool capturing = false;
  bool capture_invalid = false;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id capture_thread;
  CUgraph_st* graph = nullptr;
};

struct CUevent_st {
  bool pending = false;  // recorded, its marker not yet reached
  int queries = 0;
};

struct CUgraph_st {
  std::vector<Op> nodes;
};

struct CUgraphExec_st {
  std::vector<Op> nodes;
  std::vector<std::pair<uint8_t*, size_t>> mapped_outputs;  // learned (deferred, integrated)
};

namespace cuda_standin {

namespace {

struct Alloc {
  size_t bytes = 0;
  bool device = false;  // cudaMalloc; else pinned host memory
  bool mapped = false;
};

struct Runtime {
  std::recursive_mutex mu;
  Config cfg;
  std::map<uintptr_t, Alloc> allocs;
  std::set<CUstream_st*> streams;
  std::set<CUevent_st*> events;
  CUstream_st legacy;
  cudaError_t sticky = cudaSuccess;
  std::string fault;
  int64_t launches = 0;
  int active_captures = 0;

  Runtime() {
    if (const char* m = std::getenv("MEGA_STANDIN_MODE")) cfg.deferred = std::string(m) == "deferred";
    if (const char* i = std::getenv("MEGA_STANDIN_INTEGRATED")) cfg.integrated = std::string(i) == "1";
    if (const char* s = std::getenv("MEGA_STANDIN_SEED")) cfg.seed = std::strtoull(s, nullptr, 10);
    if (const char* d = std::getenv("MEGA_STANDIN_DEVICES")) cfg.device_count = std::atoi(d);
  }
};

Runtime& rt() {
  static Runtime* r = new Runtime();  // never destroyed: sessions may be freed at exit
  return *r;
}

thread_local cudaError_t t_last = cudaSuccess;
thread_local int t_device = 0;
thread_local CUstream_st* t_capturing = nullptr;  // this thread's capture (non-relaxed)

using Lock = std::lock_guard<std::recursive_mutex>;

CUstream_st* resolve(cudaStream_t s) { return s ? s : &rt().legacy; }

bool valid_stream(cudaStream_t s) { return !s || rt().streams.count(s) > 0; }

const Alloc* find_alloc(const void* p, uintptr_t* base) {
  auto& m = rt().allocs;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = m.upper_bound(a);
  if (it == m.begin()) return nullptr;
  --it;
  if (a >= it->first + it->second.bytes && !(it->second.bytes == 0 && a == it->first)) return nullptr;
  if (base) *base = it->first;
  return &it->second;
}

// A call the capturing thread may not make: it invalidates the capture.
bool capture_forbids() {
  CUstream_st* s = t_capturing;
  if (!s) return false;
  s->capture_invalid = true;
  return true;
}

cudaError_t run_op(Op& op) {
  if (op.event) {
    op.event->pending = false;
    return cudaSuccess;
  }
  const cudaError_t e = op.work();
  if (e != cudaSuccess) set_error(e);
  return e;
}

void flush_one(CUstream_st* s) {
  while (!s->queue.empty()) {
    Op op = std::move(s->queue.front());
    s->queue.pop_front();
    run_op(op);
  }
}

// Runs s's queued work, and what it implicitly waits for: the legacy stream
// waits for every blocking stream and they for it.
void flush(CUstream_st* s) {
  Runtime& r = rt();
  if (s == &r.legacy) {
    for (CUstream_st* o : r.streams) {
      if (!(o->flags & cudaStreamNonBlocking)) flush_one(o);
    }
  } else if (!(s->flags & cudaStreamNonBlocking)) {
    flush_one(&r.legacy);
  }
  flush_one(s);
}

void flush_all() {
  Runtime& r = rt();
  flush_one(&r.legacy);
  for (CUstream_st* o : r.streams) flush_one(o);
}

// Runs s's work up to and including the record of e.
void flush_until(CUstream_st* s, CUevent_st* e) {
  if (s != &rt().legacy && !(s->flags & cudaStreamNonBlocking)) flush_one(&rt().legacy);
  while (!s->queue.empty() && e->pending) {
    Op op = std::move(s->queue.front());
    s->queue.pop_front();
    run_op(op);
  }
}

CUstream_st* stream_of_event(CUevent_st* e) {
  Runtime& r = rt();
  auto has = [&](CUstream_st* s) {
    for (const Op& op : s->queue) {
      if (op.event == e) return true;
    }
    return false;
  };
  if (has(&r.legacy)) return &r.legacy;
  for (CUstream_st* s : r.streams) {
    if (has(s)) return s;
  }
  return nullptr;
}

cudaError_t ret(cudaError_t e) { return set_error(e); }

#define STANDIN_CHECK_STICKY()                         \
  do {                                                 \
    if (rt().sticky != cudaSuccess) return rt().sticky; \
  } while (0)

}  // namespace

cudaError_t set_error(cudaError_t e) {
  if (e == cudaSuccess || e == cudaErrorNotReady) return e;
  t_last = e;
  if (e == cudaErrorLaunchFailure) rt().sticky = e;
  return e;
}

Config config() {
  Lock l(rt().mu);
  return rt().cfg;
}

void set_config(const Config& c) {
  Lock l(rt().mu);
  rt().cfg = c;
  reset_errors();
}

void reset_errors() {
  Lock l(rt().mu);
  rt().sticky = cudaSuccess;
  rt().fault.clear();
  t_last = cudaSuccess;
}

const char* last_fault() { return rt().fault.c_str(); }

int64_t kernels_run() {
  Lock l(rt().mu);
  return rt().launches;
}

bool device_accessible(const void* p, size_t bytes) {
  Lock l(rt().mu);
  uintptr_t base = 0;
  const Alloc* a = find_alloc(p, &base);
  if (!a || !(a->device || a->mapped)) return false;
  return reinterpret_cast<uintptr_t>(p) + bytes <= base + a->bytes;
}

cudaError_t enqueue(cudaStream_t stream, std::function<cudaError_t()> work, const char* what) {
  Runtime& r = rt();
  Lock l(r.mu);
  STANDIN_CHECK_STICKY();
  if (!valid_stream(stream)) return ret(cudaErrorInvalidResourceHandle);
  CUstream_st* s = resolve(stream);
  if (s->capturing) {
    s->graph->nodes.push_back(Op{std::move(work), what, nullptr});
    return cudaSuccess;
  }
  if (s == &r.legacy && r.active_captures > 0 && t_capturing) {
    // the legacy stream would wait for the capturing stream
    capture_forbids();
    return ret(cudaErrorStreamCaptureUnsupported);
  }
  if (r.cfg.deferred) {
    s->queue.push_back(Op{std::move(work), what, nullptr});
    return cudaSuccess;
  }
  const cudaError_t e = work();
  return e == cudaSuccess ? e : set_error(e);
}

cudaError_t launch_kernel(KernelCall* call, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                          const char* name) {
  std::shared_ptr<KernelCall> k(call);
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
    return ret(cudaErrorInvalidConfiguration);
  }
  if (shmem > 48 * 1024) return ret(cudaErrorInvalidValue);
  std::string label = name ? name : "kernel";
  return enqueue(
      stream,
      [k, grid, block, label]() -> cudaError_t {
        Runtime& r = rt();
        const uint64_t seed = r.cfg.seed * 0x9e3779b97f4a7c15ull + uint64_t(++r.launches);
        const std::string fault = run_grid(k.get(), grid, block, seed);
        if (fault.empty()) return cudaSuccess;
        r.fault = label + ": " + fault;
        std::fprintf(stderr, "cuda stand-in: kernel %s\n", r.fault.c_str());
        return cudaErrorLaunchFailure;
      },
      "kernel");
}

}  // namespace cuda_standin

using namespace cuda_standin;

// ---- errors
cudaError_t cudaGetLastError() {
  Lock l(rt().mu);
  if (rt().sticky != cudaSuccess) return rt().sticky;
  const cudaError_t e = t_last;
  t_last = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() {
  Lock l(rt().mu);
  return rt().sticky != cudaSuccess ? rt().sticky : t_last;
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureWrongThread: return "cudaErrorStreamCaptureWrongThread";
    case cudaErrorUnknown: return "cudaErrorUnknown";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: return "unspecified launch failure (cuda stand-in: a fault in a kernel)";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureWrongThread: return "attempt to terminate a thread-local capture sequence from another thread";
    default: return "unknown error";
  }
}

// ---- devices
cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return ret(cudaErrorInvalidValue);
  *count = config().device_count;
  return *count > 0 ? cudaSuccess : ret(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= config().device_count) return ret(cudaErrorInvalidDevice);
  t_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return ret(cudaErrorInvalidValue);
  *device = t_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop) return ret(cudaErrorInvalidValue);
  if (device < 0 || device >= config().device_count) return ret(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp();
  std::snprintf(prop->name, sizeof prop->name, "CUDA stand-in on the CPU (%s, %s)",
                config().integrated ? "integrated" : "discrete", config().deferred ? "deferred" : "eager");
  prop->totalGlobalMem = size_t(8) << 30;
  prop->major = 8;
  prop->minor = 7;
  prop->multiProcessorCount = 1;
  prop->maxThreadsPerBlock = 1024;
  prop->integrated = config().integrated ? 1 : 0;
  prop->canMapHostMemory = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp p;
  const cudaError_t e = cudaGetDeviceProperties(&p, device);
  if (e != cudaSuccess) return e;
  if (!value) return ret(cudaErrorInvalidValue);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrIntegrated: *value = p.integrated; break;
    case cudaDevAttrCanMapHostMemory: *value = p.canMapHostMemory; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    default: return ret(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (capture_forbids()) return ret(cudaErrorStreamCaptureUnsupported);
  flush_all();
  return rt().sticky;
}

// ---- memory
cudaError_t cudaMalloc(void** p, size_t bytes) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (!p) return ret(cudaErrorInvalidValue);
  if (capture_forbids()) return ret(cudaErrorStreamCaptureUnsupported);
  *p = nullptr;
  void* m = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  if (!m) return ret(cudaErrorMemoryAllocation);
  std::memset(m, 0xff, bytes);  // NaN: what an uninitialized read finds
  rt().allocs[reinterpret_cast<uintptr_t>(m)] = Alloc{bytes, true, false};
  *p = m;
  return cudaSuccess;
}

static cudaError_t free_kind(void* p, bool device) {
  Lock l(rt().mu);
  if (!p) return cudaSuccess;
  if (capture_forbids()) return ret(cudaErrorStreamCaptureUnsupported);
  auto it = rt().allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == rt().allocs.end() || it->second.device != device) return ret(cudaErrorInvalidValue);
  flush_all();  // cudaFree waits for the device
  rt().allocs.erase(it);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) { return free_kind(p, true); }
cudaError_t cudaFreeHost(void* p) { return free_kind(p, false); }

cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned flags) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (!p || (flags & ~0x7u)) return ret(cudaErrorInvalidValue);
  if (capture_forbids()) return ret(cudaErrorStreamCaptureUnsupported);
  void* m = std::aligned_alloc(4096, (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096);
  if (!m) return ret(cudaErrorMemoryAllocation);
  rt().allocs[reinterpret_cast<uintptr_t>(m)] = Alloc{bytes, false, (flags & cudaHostAllocMapped) != 0};
  *p = m;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t bytes) { return cudaHostAlloc(p, bytes, cudaHostAllocDefault); }

cudaError_t cudaHostGetDevicePointer(void** dev, void* host, unsigned flags) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (!dev || flags != 0) return ret(cudaErrorInvalidValue);
  const Alloc* a = find_alloc(host, nullptr);
  if (!a || a->device || !a->mapped) return ret(cudaErrorInvalidValue);  // not mapped pinned memory
  *dev = host;  // one address space, as with UVA
  return cudaSuccess;
}

namespace {

bool in_device_alloc(const void* p) {
  const Alloc* a = find_alloc(p, nullptr);
  return a && a->device;
}

bool is_pinned(const void* p) {
  const Alloc* a = find_alloc(p, nullptr);
  return a && !a->device;
}

// The direction and bounds checks of cudaMemcpy*.
cudaError_t check_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return cudaErrorInvalidValue;
  const bool dst_dev = in_device_alloc(dst), src_dev = in_device_alloc(src);
  switch (kind) {
    case cudaMemcpyHostToDevice:
      if (!dst_dev || src_dev) return cudaErrorInvalidValue;
      break;
    case cudaMemcpyDeviceToHost:
      if (!src_dev || dst_dev) return cudaErrorInvalidValue;
      break;
    case cudaMemcpyDeviceToDevice:
      if (!src_dev || !dst_dev) return cudaErrorInvalidValue;
      break;
    case cudaMemcpyHostToHost:
      if (src_dev || dst_dev) return cudaErrorInvalidValue;
      break;
    case cudaMemcpyDefault:
      break;
    default:
      return cudaErrorInvalidMemcpyDirection;
  }
  if (dst_dev && !device_accessible(dst, bytes)) return cudaErrorInvalidValue;  // past the allocation's end
  if (src_dev && !device_accessible(src, bytes)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (const cudaError_t e = check_copy(dst, src, bytes, kind)) return ret(e);
  if (bytes == 0) return cudaSuccess;
  if (!valid_stream(s)) return ret(cudaErrorInvalidResourceHandle);
  CUstream_st* st = resolve(s);
  const bool to_host = !in_device_alloc(dst);
  if (to_host && !is_pinned(dst) && !st->capturing) {
    // to pageable memory the copy is synchronous
    if (rt().cfg.deferred) flush(st);
    std::memcpy(dst, src, bytes);
    return cudaSuccess;
  }
  if (!in_device_alloc(src) && !is_pinned(src) && !st->capturing) {
    // from pageable memory CUDA stages the source before returning
    auto copy = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(src),
                                                       static_cast<const uint8_t*>(src) + bytes);
    return enqueue(s, [dst, copy]() { std::memcpy(dst, copy->data(), copy->size()); return cudaSuccess; },
                   "cudaMemcpyAsync");
  }
  if (to_host && rt().cfg.deferred && !st->capturing) std::memset(dst, 0xff, bytes);  // NaN until it completes
  return enqueue(s, [dst, src, bytes]() { std::memmove(dst, src, bytes); return cudaSuccess; }, "cudaMemcpyAsync");
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (capture_forbids()) return ret(cudaErrorStreamCaptureUnsupported);
  if (const cudaError_t e = check_copy(dst, src, bytes, kind)) return ret(e);
  if (bytes == 0) return cudaSuccess;
  CUstream_st* legacy = &rt().legacy;
  if (!in_device_alloc(src) && !is_pinned(src) && in_device_alloc(dst)) {
    // pageable to device: returns once the source is staged; the copy itself
    // is ordered on the legacy default stream (not with non-blocking streams)
    flush(legacy);
    return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
  }
  flush(legacy);  // everything else is synchronous
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (bytes == 0) return cudaSuccess;
  if (!device_accessible(p, bytes)) return ret(cudaErrorInvalidValue);
  return enqueue(s, [p, value, bytes]() { std::memset(p, value, bytes); return cudaSuccess; }, "cudaMemsetAsync");
}

cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  Lock l(rt().mu);
  if (capture_forbids()) return ret(cudaErrorStreamCaptureUnsupported);
  return cudaMemsetAsync(p, value, bytes, nullptr);  // asynchronous for device memory, as in CUDA
}

// ---- streams
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (!s || (flags & ~cudaStreamNonBlocking)) return ret(cudaErrorInvalidValue);
  auto* st = new CUstream_st();
  st->flags = flags;
  st->device = t_device;
  rt().streams.insert(st);
  *s = st;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  Lock l(rt().mu);
  if (!s || !rt().streams.count(s)) return ret(cudaErrorInvalidResourceHandle);
  if (s->capturing) return ret(cudaErrorStreamCaptureUnsupported);
  flush_one(s);  // queued work still runs, as in CUDA
  rt().streams.erase(s);
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (!valid_stream(s)) return ret(cudaErrorInvalidResourceHandle);
  if (capture_forbids() || resolve(s)->capturing) return ret(cudaErrorStreamCaptureUnsupported);
  flush(resolve(s));
  return rt().sticky;
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (!valid_stream(s)) return ret(cudaErrorInvalidResourceHandle);
  if (capture_forbids()) return ret(cudaErrorStreamCaptureUnsupported);
  return resolve(s)->queue.empty() ? cudaSuccess : cudaErrorNotReady;
}

// ---- events
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (!e || (flags & ~0xfu)) return ret(cudaErrorInvalidValue);
  *e = new CUevent_st();
  rt().events.insert(*e);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  Lock l(rt().mu);
  if (!e || !rt().events.count(e)) return ret(cudaErrorInvalidResourceHandle);
  if (e->pending) {
    if (CUstream_st* s = stream_of_event(e)) flush_until(s, e);
  }
  rt().events.erase(e);
  delete e;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (!e || !rt().events.count(e) || !valid_stream(s)) return ret(cudaErrorInvalidResourceHandle);
  CUstream_st* st = resolve(s);
  if (st->capturing) {
    st->graph->nodes.push_back(Op{[e]() { e->pending = false; return cudaSuccess; }, "event record", nullptr});
    return cudaSuccess;
  }
  if (e->pending) {  // re-recorded before it completed: the old record no longer completes it
    for (CUstream_st* o : rt().streams) {
      for (Op& op : o->queue) {
        if (op.event == e) op.event = nullptr, op.work = []() { return cudaSuccess; };
      }
    }
  }
  e->queries = 0;
  if (!rt().cfg.deferred) {
    e->pending = false;
    return cudaSuccess;
  }
  e->pending = true;
  st->queue.push_back(Op{nullptr, "event record", e});
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (!e || !rt().events.count(e)) return ret(cudaErrorInvalidResourceHandle);
  if (capture_forbids()) return ret(cudaErrorStreamCaptureUnsupported);
  if (!e->pending) return cudaSuccess;
  if (++e->queries == 1) return cudaErrorNotReady;  // the first look finds it still running
  if (CUstream_st* s = stream_of_event(e)) flush_until(s, e);
  return rt().sticky;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (!e || !rt().events.count(e)) return ret(cudaErrorInvalidResourceHandle);
  if (capture_forbids()) return ret(cudaErrorStreamCaptureUnsupported);
  if (e->pending) {
    if (CUstream_st* s = stream_of_event(e)) flush_until(s, e);
  }
  return rt().sticky;
}

// ---- graphs
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (!s) return ret(cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot be captured
  if (!rt().streams.count(s)) return ret(cudaErrorInvalidResourceHandle);
  if (s->capturing) return ret(cudaErrorInvalidValue);
  if (rt().cfg.deferred) flush(s);  // (work queued before the capture is not part of it)
  s->capturing = true;
  s->capture_invalid = false;
  s->mode = mode;
  s->capture_thread = std::this_thread::get_id();
  s->graph = new CUgraph_st();
  if (mode != cudaStreamCaptureModeRelaxed) t_capturing = s;
  ++rt().active_captures;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  Lock l(rt().mu);
  if (!s || !rt().streams.count(s) || !graph) return ret(cudaErrorInvalidValue);
  if (!s->capturing) return ret(cudaErrorInvalidValue);
  if (s->mode != cudaStreamCaptureModeRelaxed && s->capture_thread != std::this_thread::get_id()) {
    return ret(cudaErrorStreamCaptureWrongThread);
  }
  s->capturing = false;
  --rt().active_captures;
  if (t_capturing == s) t_capturing = nullptr;
  CUgraph_st* g = s->graph;
  s->graph = nullptr;
  if (s->capture_invalid) {
    delete g;
    *graph = nullptr;
    return ret(cudaErrorStreamCaptureInvalidated);
  }
  *graph = g;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
  Lock l(rt().mu);
  if (!status || !valid_stream(s)) return ret(cudaErrorInvalidValue);
  const CUstream_st* st = resolve(s);
  *status = !st->capturing ? cudaStreamCaptureStatusNone
                           : (st->capture_invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (!exec || !graph || flags != 0) return ret(cudaErrorInvalidValue);
  auto* x = new CUgraphExec_st();
  x->nodes = graph->nodes;
  *exec = x;
  return cudaSuccess;
}

cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t s) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (!exec || !valid_stream(s)) return ret(cudaErrorInvalidValue);
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  Lock l(rt().mu);
  STANDIN_CHECK_STICKY();
  if (!exec || !valid_stream(s)) return ret(cudaErrorInvalidValue);
  Runtime& r = rt();
  const bool watch = r.cfg.deferred && r.cfg.integrated;
  if (watch) {
    for (auto& o : exec->mapped_outputs) std::memset(o.first, 0xff, o.second);  // NaN until it completes
  }
  return enqueue(
      s,
      [exec, watch]() -> cudaError_t {
        // Mapped memory the graph writes: compare before and after (a run
        // that writes a value equal to the old one goes unnoticed).
        std::vector<std::pair<uint8_t*, std::vector<uint8_t>>> before;
        if (watch) {
          for (auto& a : rt().allocs) {
            if (a.second.mapped) {
              auto* p = reinterpret_cast<uint8_t*>(a.first);
              before.emplace_back(p, std::vector<uint8_t>(p, p + a.second.bytes));
            }
          }
        }
        for (Op& op : exec->nodes) {
          const cudaError_t e = op.work();
          if (e != cudaSuccess) return e;
        }
        for (auto& b : before) {
          const size_t n = b.second.size() / 4 * 4;
          for (size_t i = 0; i < n; i += 4) {
            if (std::memcmp(b.first + i, b.second.data() + i, 4) == 0) continue;
            auto& outs = exec->mapped_outputs;
            if (!outs.empty() && outs.back().first + outs.back().second == b.first + i) {
              outs.back().second += 4;
            } else if (std::none_of(outs.begin(), outs.end(), [&](const std::pair<uint8_t*, size_t>& o) {
                         return b.first + i >= o.first && b.first + i < o.first + o.second;
                       })) {
              outs.emplace_back(b.first + i, 4);
            }
          }
        }
        return cudaSuccess;
      },
      "graph");
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  Lock l(rt().mu);
  // queued launches of it still need it: let them run first
  if (exec) flush_all();
  delete exec;
  return cudaSuccess;
}

namespace cuda_standin {
void note_half_overflow(float f) {
  static std::atomic<int64_t> count{0};
  if (count++ < 5) std::fprintf(stderr, "cuda stand-in: float16 overflow: %g rounds to infinity\n", double(f));
}
}  // namespace cuda_standin
