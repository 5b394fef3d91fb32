// devmesh/bench/device_buffer.h
// -----------------------------------------------------------------------------
// A benchmark buffer on the host ("cpu") or on the current CUDA device
// ("cuda"), with copies to and from host memory for filling and checking.
#ifndef DEVMESH_BENCH_DEVICE_BUFFER_H_
#define DEVMESH_BENCH_DEVICE_BUFFER_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace devmesh {

class DeviceBuffer {
 public:
  // `bytes` bytes on `device_type` ("cpu" or "cuda"). Host buffers of 1 MiB
  // or more are 2 MiB-aligned and advised to use transparent huge pages
  // (MADV_HUGEPAGE, a hint the kernel may ignore), so that the TLB misses of
  // a 4 KiB-paged buffer do not add to, and vary, the timed copies. Errors:
  // InvalidArgument for another device type; Unavailable for "cuda" in a
  // build without CUDA; ResourceExhausted when the allocation fails.
  static absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(
      absl::string_view device_type, size_t bytes);
  virtual ~DeviceBuffer() = default;

  virtual void* data() = 0;
  virtual size_t bytes() const = 0;
  // Copies `bytes()` bytes from / to host memory.
  virtual absl::Status CopyFromHost(const void* host) = 0;
  virtual absl::Status CopyToHost(void* host) const = 0;
};

// True when at least `n` CUDA devices are visible (false without CUDA).
bool HasCudaDevices(int n);

}  // namespace devmesh

#endif  // DEVMESH_BENCH_DEVICE_BUFFER_H_
