// The process-wide guard allocator behind `pytest --gpu-memsafety` (gpu_memsafety.placement.allocator).
//
// torch.cuda.memory.CUDAPluggableAllocator calls gms_malloc once per storage with the exact byte count and
// gms_free when the storage dies. Each allocation gets one of four placements, chosen for the whole process:
//   markers      cudaMalloc(256 + round_up(size, 256) + 256): the tensor starts 256 B in (cudaMalloc's
//                alignment kept), every other byte holds 0xA5; a write outside the tensor changes a marker;
//   exact        cudaMalloc(size): the tensor is its whole allocation (memcheck with --padding sees both ends);
//   page_after   a VMM mapping that ends where an unmapped granule starts: the tensor ends there (rounded down to
//                256 B; the 0..255 B between its end and the page hold 0xA5), the first byte past it faults;
//   page_before  an unmapped granule, then the mapping: the tensor starts on its first byte.
// A freed block is not returned at once: it waits in a quarantine, so that its guards are checked before the
// memory goes back (a freed block's guards vanish with it). gms_check synchronizes, checks every guard of every
// live and quarantined block in one kernel launch per device, re-arms the live ones, releases the quarantined
// ones and hands back the blocks whose guards changed, with their guard bytes.
//
// Nothing here calls back into torch's allocator. An out-of-memory is thrown as c10::OutOfMemoryError, so
// Python sees torch.OutOfMemoryError (what the caching allocator raises), after the quarantine was released
// and the allocation retried. Allocations during CUDA graph capture are made in relaxed capture mode and left
// unpainted (a memset would be captured into the graph); they are counted so the plugin can say so.
#include <cuda.h>
#include <cuda_runtime.h>
#include <c10/util/Exception.h>

#include <sys/types.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

constexpr size_t kAlign = 256;             // cudaMalloc's alignment: every tensor start keeps it
constexpr size_t kGuard = 256;             // marker bytes before the tensor, and at least this many after it
constexpr unsigned char kMarker = 0xA5;
constexpr size_t kMaxBack = 2 * kGuard;    // alignment tail (< 256) + back guard
constexpr int kThreads = 256;

enum Placement : int { kMarkers = 0, kExact = 1, kPageAfter = 2, kPageBefore = 3 };

struct Block {
  uint64_t id = 0;
  char* user = nullptr;        // what torch gets
  size_t size = 0;             // what torch asked for
  int device = 0;
  int32_t tag = 0;             // the test that allocated it (an index the Python side keeps)
  int placement = kMarkers;
  bool painted = false;        // its marker bytes were written (not during a graph capture)
  char* front = nullptr;       // marker bytes before the tensor (may be empty)
  size_t front_len = 0;
  char* back = nullptr;        // marker bytes after the tensor (may be empty)
  size_t back_len = 0;
  // what to give back
  void* base = nullptr;        // cudaMalloc'd pointer (markers, exact)
  CUdeviceptr reserve = 0;     // VMM reservation (pages)
  size_t reserve_size = 0;
  CUdeviceptr mapped_at = 0;
  size_t mapped = 0;
  CUmemGenericAllocationHandle handle = 0;
};

}  // namespace

extern "C" {

// What gms_check hands back for one block whose markers changed.
struct gms_hit {
  uint64_t id;
  uint64_t size;
  int32_t tag;
  int32_t live;                // 1: still allocated (re-armed); 0: freed since the last check (released now)
  uint32_t front_len;
  uint32_t back_len;
  uint8_t front[kGuard];
  uint8_t back[kMaxBack];
};

struct gms_info {
  uint64_t allocations;        // made through this allocator
  uint64_t live;
  uint64_t live_bytes;
  uint64_t quarantined;
  uint64_t quarantined_bytes;
  uint64_t capture_allocations;  // made while a CUDA graph was being captured (left unpainted)
  uint64_t unknown_frees;      // frees of pointers this allocator never gave out
  uint64_t oom_retries;        // allocations that succeeded only after the quarantine was released
  uint64_t pending_hits;       // found by a flush inside gms_free, not yet handed out
  uint64_t paged;              // blocks placed on a guard page
};

typedef void (*gms_hook_fn)(int event, uint64_t id, uint64_t size, int device, uint64_t ptr);

}  // extern "C"

namespace {

struct GuardDesc {
  const unsigned char* front;
  const unsigned char* back;
  uint32_t front_len;
  uint32_t back_len;
};

__global__ void check_guards(const GuardDesc* descs, unsigned int* bad, int n) {
  int b = blockIdx.x;
  if (b >= n) return;
  GuardDesc d = descs[b];
  unsigned int seen = 0;
  for (uint32_t i = threadIdx.x; i < d.front_len; i += blockDim.x) seen |= (d.front[i] != kMarker);
  for (uint32_t i = threadIdx.x; i < d.back_len; i += blockDim.x) seen |= (d.back[i] != kMarker);
  if (seen) atomicOr(&bad[b], 1u);
}

struct DeviceScratch {
  GuardDesc* descs = nullptr;
  unsigned int* bad = nullptr;
  size_t capacity = 0;
};

struct State {
  std::mutex mu;
  int placement = kMarkers;
  size_t quarantine_limit = size_t(1) << 30;    // bytes of freed blocks kept before a flush
  size_t quarantine_count_limit = 1 << 16;
  uint64_t next_id = 1;
  int32_t tag = 0;
  int64_t tag_index = 0;                         // allocations made under the current tag so far
  int64_t page_lo = 0, page_hi = INT64_MAX;      // which of a tag's allocations get a page (bisecting a fault)
  std::unordered_map<char*, Block> live;
  std::vector<Block> quarantine;
  size_t quarantine_bytes = 0;
  std::vector<gms_hit> pending;
  std::unordered_map<int, DeviceScratch> scratch;
  gms_hook_fn hook = nullptr;
  gms_info info{};
  std::string last_error;
};

State& state() {
  static State* s = new State();   // never destroyed: frees can arrive during interpreter shutdown
  return *s;
}

size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

// Relaxed capture mode for our own CUDA calls: cudaMalloc is "unsafe" under a global-mode capture.
struct RelaxedCapture {
  cudaStreamCaptureMode prev = cudaStreamCaptureModeRelaxed;
  RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&prev); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&prev); }
};

struct DeviceGuard {
  int prev = -1;
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
    if (prev != device) cudaSetDevice(device);
  }
  ~DeviceGuard() {
    int now = -1;
    if (prev >= 0 && cudaGetDevice(&now) == cudaSuccess && now != prev) cudaSetDevice(prev);
  }
};

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

std::string cuda_words(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")";
}

std::string driver_words(CUresult res) {
  const char* name = nullptr;
  cuGetErrorName(res, &name);
  return name ? std::string(name) : std::to_string(int(res));
}

void release(Block& b) {
  DeviceGuard dg(b.device);
  if (b.base != nullptr) {
    cudaFree(b.base);
  } else if (b.reserve != 0) {
    cuMemUnmap(b.mapped_at, b.mapped);
    cuMemRelease(b.handle);
    cuMemAddressFree(b.reserve, b.reserve_size);
  }
}

// Allocation by placement; false (and `why`) when the memory is not there.
bool place_cuda(Block& b, size_t bytes, std::string& why, bool& oom) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    oom = (err == cudaErrorMemoryAllocation);
    why = "cudaMalloc(" + std::to_string(bytes) + ") failed: " + cuda_words(err);
    return false;
  }
  b.base = p;
  return true;
}

bool place_pages(Block& b, bool page_before, std::string& why, bool& oom) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = b.device;
  size_t gran = 0;
  CUresult r = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS) { why = "cuMemGetAllocationGranularity: " + driver_words(r); return false; }
  size_t mapped = round_up(b.size + kAlign, gran);
  size_t reserve = mapped + gran;
  CUdeviceptr base = 0;
  r = cuMemAddressReserve(&base, reserve, gran, 0, 0);
  if (r != CUDA_SUCCESS) { why = "cuMemAddressReserve: " + driver_words(r); oom = (r == CUDA_ERROR_OUT_OF_MEMORY); return false; }
  CUmemGenericAllocationHandle handle = 0;
  r = cuMemCreate(&handle, mapped, &prop, 0);
  if (r != CUDA_SUCCESS) {
    cuMemAddressFree(base, reserve);
    why = "cuMemCreate: " + driver_words(r);
    oom = (r == CUDA_ERROR_OUT_OF_MEMORY);
    return false;
  }
  CUdeviceptr at = page_before ? base + gran : base;
  r = cuMemMap(at, mapped, 0, handle, 0);
  if (r == CUDA_SUCCESS) {
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = cuMemSetAccess(at, mapped, &access, 1);
    if (r != CUDA_SUCCESS) cuMemUnmap(at, mapped);
  }
  if (r != CUDA_SUCCESS) {
    cuMemRelease(handle);
    cuMemAddressFree(base, reserve);
    why = "cuMemMap/cuMemSetAccess: " + driver_words(r);
    return false;
  }
  b.reserve = base;
  b.reserve_size = reserve;
  b.mapped_at = at;
  b.mapped = mapped;
  b.handle = handle;
  return true;
}

// Where the tensor and its marker bytes sit inside what was allocated.
void lay_out(Block& b) {
  if (b.placement == kMarkers) {
    char* base = static_cast<char*>(b.base);
    b.front = base;
    b.front_len = kGuard;
    b.user = base + kGuard;
    b.back = b.user + b.size;
    b.back_len = (round_up(b.size, kAlign) - b.size) + kGuard;
  } else if (b.placement == kExact) {
    b.user = static_cast<char*>(b.base);
  } else if (b.placement == kPageAfter) {
    char* end = reinterpret_cast<char*>(b.mapped_at + b.mapped);
    uintptr_t start = reinterpret_cast<uintptr_t>(end) - b.size;
    b.user = reinterpret_cast<char*>(start / kAlign * kAlign);
    b.back = b.user + b.size;
    b.back_len = static_cast<size_t>(end - b.back);       // the alignment tail before the page, 0..255 B
  } else {
    b.user = reinterpret_cast<char*>(b.mapped_at);
    b.back = b.user + b.size;
    b.back_len = round_up(b.size, kAlign) - b.size;
  }
}

void paint(Block& b, cudaStream_t stream) {
  if (b.front_len) cudaMemsetAsync(b.front, kMarker, b.front_len, stream);
  if (b.back_len) cudaMemsetAsync(b.back, kMarker, b.back_len, stream);
  b.painted = (b.front_len || b.back_len);
}

bool grow_scratch(DeviceScratch& s, size_t n, std::string& why) {
  if (s.capacity >= n) return true;
  size_t cap = n < 1024 ? 1024 : round_up(n, 1024);
  if (s.descs) cudaFree(s.descs);
  if (s.bad) cudaFree(s.bad);
  s.descs = nullptr;
  s.bad = nullptr;
  s.capacity = 0;
  cudaError_t e1 = cudaMalloc(reinterpret_cast<void**>(&s.descs), cap * sizeof(GuardDesc));
  cudaError_t e2 = cudaMalloc(reinterpret_cast<void**>(&s.bad), cap * sizeof(unsigned int));
  if (e1 != cudaSuccess || e2 != cudaSuccess) {
    cudaGetLastError();
    why = "scratch for the guard check: " + cuda_words(e1 != cudaSuccess ? e1 : e2);
    return false;
  }
  s.capacity = cap;
  return true;
}

gms_hit make_hit(const Block& b, bool live) {
  gms_hit h{};
  h.id = b.id;
  h.size = b.size;
  h.tag = b.tag;
  h.live = live ? 1 : 0;
  h.front_len = static_cast<uint32_t>(b.front_len);
  h.back_len = static_cast<uint32_t>(b.back_len);
  if (b.front_len) cudaMemcpy(h.front, b.front, b.front_len, cudaMemcpyDeviceToHost);
  if (b.back_len) cudaMemcpy(h.back, b.back, b.back_len, cudaMemcpyDeviceToHost);
  return h;
}

// Check the painted blocks of one device (already synchronized); append hits; re-arm live ones. 0 or a CUDA error.
int check_device(State& s, int device, std::vector<std::pair<Block*, bool>>& blocks) {
  DeviceGuard dg(device);
  DeviceScratch& scr = s.scratch[device];
  if (!grow_scratch(scr, blocks.size(), s.last_error)) return -1;
  std::vector<GuardDesc> descs(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Block& b = *blocks[i].first;
    descs[i] = GuardDesc{reinterpret_cast<const unsigned char*>(b.front), reinterpret_cast<const unsigned char*>(b.back),
                         static_cast<uint32_t>(b.front_len), static_cast<uint32_t>(b.back_len)};
  }
  cudaMemcpy(scr.descs, descs.data(), descs.size() * sizeof(GuardDesc), cudaMemcpyHostToDevice);
  cudaMemset(scr.bad, 0, blocks.size() * sizeof(unsigned int));
  check_guards<<<static_cast<unsigned int>(blocks.size()), kThreads>>>(scr.descs, scr.bad, static_cast<int>(blocks.size()));
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    s.last_error = "launching the guard check on device " + std::to_string(device) + ": " + cuda_words(err);
    return int(err);
  }
  std::vector<unsigned int> bad(blocks.size());
  err = cudaMemcpy(bad.data(), scr.bad, bad.size() * sizeof(unsigned int), cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) {
    s.last_error = "guard check on device " + std::to_string(device) + ": " + cuda_words(err);
    return int(err);
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (!bad[i]) continue;
    Block& b = *blocks[i].first;
    s.pending.push_back(make_hit(b, blocks[i].second));
    if (blocks[i].second) paint(b, nullptr);
  }
  err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    s.last_error = "re-arming guards on device " + std::to_string(device) + ": " + cuda_words(err);
    return int(err);
  }
  return 0;
}

// Synchronize every device that holds blocks, check all guards, release the quarantine. Caller holds s.mu.
int flush_locked(State& s) {
  RelaxedCapture relaxed;
  std::unordered_map<int, std::vector<std::pair<Block*, bool>>> by_device;
  for (auto& kv : s.live)
    if (kv.second.painted) by_device[kv.second.device].push_back({&kv.second, true});
  for (auto& b : s.quarantine)
    if (b.painted) by_device[b.device].push_back({&b, false});
  std::set<int> devices;
  for (auto& kv : s.live) devices.insert(kv.second.device);
  for (auto& b : s.quarantine) devices.insert(b.device);
  int status = 0;
  for (int device : devices) {
    DeviceGuard dg(device);
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
      s.last_error = "synchronizing device " + std::to_string(device) + " before the guard check: " + cuda_words(err);
      return int(err);
    }
  }
  for (auto& kv : by_device) {
    if (kv.second.empty()) continue;
    status = check_device(s, kv.first, kv.second);
    if (status != 0) return status;
  }
  for (auto& b : s.quarantine) release(b);
  s.quarantine.clear();
  s.quarantine_bytes = 0;
  return 0;
}

void call_hook(gms_hook_fn hook, int event, const Block& b) {
  if (hook) hook(event, b.id, b.size, b.device, reinterpret_cast<uint64_t>(b.user));
}

}  // namespace

extern "C" {

// Settings for the whole process; call before the allocator is installed.
int gms_configure(int placement, uint64_t quarantine_bytes, uint64_t quarantine_count) {
  if (placement < kMarkers || placement > kPageBefore) return -1;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.placement = placement;
  if (quarantine_bytes) s.quarantine_limit = quarantine_bytes;
  if (quarantine_count) s.quarantine_count_limit = quarantine_count;
  return 0;
}

void gms_set_hook(gms_hook_fn hook) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.hook = hook;
}

void gms_set_tag(int32_t tag) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.tag = tag;
  s.tag_index = 0;
}

// Page placements only: which of each tag's allocations (by order, [lo, hi)) get a page; the others are exact.
void gms_set_page_window(int64_t lo, int64_t hi) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.page_lo = lo;
  s.page_hi = hi;
}

void* gms_malloc(ssize_t requested, int device, cudaStream_t stream) {
  if (requested <= 0) return nullptr;        // as torch's own allocators: an empty storage has no memory
  State& s = state();
  RelaxedCapture relaxed;
  DeviceGuard dg(device);
  bool in_capture = capturing(stream);
  Block b;
  b.size = static_cast<size_t>(requested);
  b.device = device;
  gms_hook_fn hook = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    b.placement = s.placement;
    if ((b.placement == kPageAfter || b.placement == kPageBefore) &&
        (s.tag_index < s.page_lo || s.tag_index >= s.page_hi))
      b.placement = kExact;
    s.tag_index += 1;
    std::string why;
    for (int attempt = 0; attempt < 2; ++attempt) {
      bool oom = false;
      bool ok = (b.placement == kMarkers) ? place_cuda(b, kGuard + round_up(b.size, kAlign) + kGuard, why, oom)
              : (b.placement == kExact)   ? place_cuda(b, b.size, why, oom)
                                          : place_pages(b, b.placement == kPageBefore, why, oom);
      if (ok) break;
      if (!oom || attempt == 1 || in_capture || s.quarantine.empty()) {
        s.last_error = why;
        TORCH_CHECK_WITH(OutOfMemoryError, !oom, "gpu-memsafety guard allocator: CUDA out of memory: ", why,
                         " for a tensor of ", b.size, " bytes on device ", device, " (live: ", s.live.size(),
                         " blocks, ", s.info.live_bytes, " bytes)");
        TORCH_CHECK(false, "gpu-memsafety guard allocator: ", why);
      }
      s.info.oom_retries += 1;
      flush_locked(s);                       // give the quarantine back, then try once more
    }
    lay_out(b);
    if (in_capture) {
      s.info.capture_allocations += 1;
    } else {
      paint(b, stream);
    }
    b.id = s.next_id++;
    b.tag = s.tag;
    s.info.allocations += 1;
    s.info.live += 1;
    s.info.live_bytes += b.size;
    if (b.placement == kPageAfter || b.placement == kPageBefore) s.info.paged += 1;
    s.live[b.user] = b;
    hook = s.hook;
  }
  call_hook(hook, 0, b);
  return b.user;
}

void gms_free(void* ptr, size_t /*size*/, int /*device*/, cudaStream_t stream) {
  if (ptr == nullptr) return;
  State& s = state();
  Block b;
  gms_hook_fn hook = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.live.find(static_cast<char*>(ptr));
    if (it == s.live.end()) {
      s.info.unknown_frees += 1;
      return;
    }
    b = it->second;
    s.live.erase(it);
    s.info.live -= 1;
    s.info.live_bytes -= b.size;
    s.quarantine.push_back(b);
    s.quarantine_bytes += b.size;
    hook = s.hook;
    bool full = s.quarantine_bytes > s.quarantine_limit || s.quarantine.size() > s.quarantine_count_limit;
    if (full && !capturing(stream)) flush_locked(s);
  }
  call_hook(hook, 1, b);
}

// Check every guard now. Fills up to `cap` hits (blocks whose markers changed since the last check, in the
// order found); *found is how many there were. Returns 0, or a CUDA error code (gms_last_error says more).
int gms_check(gms_hit* out, int cap, int* found) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int status = flush_locked(s);
  int n = static_cast<int>(s.pending.size());
  if (found) *found = n;
  for (int i = 0; i < n && i < cap; ++i) out[i] = s.pending[i];
  s.pending.clear();
  return status;
}

void gms_get_info(gms_info* out) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.info.quarantined = s.quarantine.size();
  s.info.quarantined_bytes = s.quarantine_bytes;
  s.info.pending_hits = s.pending.size();
  *out = s.info;
}

int gms_last_error(char* out, int cap) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (cap <= 0) return static_cast<int>(s.last_error.size());
  std::strncpy(out, s.last_error.c_str(), static_cast<size_t>(cap) - 1);
  out[cap - 1] = '\0';
  return static_cast<int>(s.last_error.size());
}

// A marker in a compute-sanitizer run: a failing call the sanitizer records as an API error, in order with the
// memory-access records of the kernels before it (the caller synchronized first). Returns the error it got.
int gms_fence(void) {
  cudaError_t err = cudaSetDevice(INT_MAX);
  cudaGetLastError();
  return int(err);
}

}  // extern "C"
