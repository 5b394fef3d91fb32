#include "bench/device_buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#ifdef DEVMESH_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace devmesh {
namespace {

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};
using HostMemory = std::unique_ptr<char, FreeDeleter>;

// Host memory of `bytes`: from 1 MiB, 2 MiB-aligned and advised to use huge
// pages. Null when the allocation fails.
HostMemory AllocateHost(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  if (bytes < (size_t{1} << 20)) {
    return HostMemory(static_cast<char*>(std::malloc(bytes == 0 ? 1 : bytes)));
  }
  if (bytes > std::numeric_limits<size_t>::max() - kHugePage) return nullptr;
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  HostMemory p(static_cast<char*>(std::aligned_alloc(kHugePage, rounded)));
  if (p != nullptr) {
    // A hint only: without transparent huge pages it fails, harmlessly.
    (void)madvise(p.get(), rounded, MADV_HUGEPAGE);
  }
  return p;
}

class HostBuffer : public DeviceBuffer {
 public:
  HostBuffer(HostMemory data, size_t bytes)
      : data_(std::move(data)), bytes_(bytes) {}
  void* data() override { return data_.get(); }
  size_t bytes() const override { return bytes_; }
  absl::Status CopyFromHost(const void* host) override {
    std::memcpy(data_.get(), host, bytes_);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* host) const override {
    std::memcpy(host, data_.get(), bytes_);
    return absl::OkStatus();
  }

 private:
  HostMemory data_;
  size_t bytes_;
};

#ifdef DEVMESH_WITH_CUDA
absl::Status CudaStatus(cudaError_t e, absl::string_view what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, " failed: ", cudaGetErrorString(e)));
}

class CudaBuffer : public DeviceBuffer {
 public:
  CudaBuffer(void* data, size_t bytes) : data_(data), bytes_(bytes) {}
  ~CudaBuffer() override { cudaFree(data_); }
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }
  absl::Status CopyFromHost(const void* host) override {
    return CudaStatus(cudaMemcpy(data_, host, bytes_, cudaMemcpyHostToDevice),
                      "cudaMemcpy to device");
  }
  absl::Status CopyToHost(void* host) const override {
    return CudaStatus(cudaMemcpy(host, data_, bytes_, cudaMemcpyDeviceToHost),
                      "cudaMemcpy to host");
  }

 private:
  void* data_;
  size_t bytes_;
};
#endif

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceBuffer>> DeviceBuffer::Allocate(
    absl::string_view device_type, size_t bytes) {
  if (device_type == "cpu") {
    HostMemory data = AllocateHost(bytes);
    if (data == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", bytes, " bytes of host memory"));
    }
    return std::make_unique<HostBuffer>(std::move(data), bytes);
  }
  if (device_type != "cuda") {
    return absl::InvalidArgumentError(absl::StrCat(
        "benchmark buffers live on \"cpu\" or \"cuda\", not '", device_type,
        "'"));
  }
#ifdef DEVMESH_WITH_CUDA
  void* data = nullptr;
  if (cudaMalloc(&data, bytes) != cudaSuccess) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cudaMalloc of ", bytes, " bytes failed"));
  }
  return std::make_unique<CudaBuffer>(data, bytes);
#else
  return absl::UnavailableError("devmesh was built without CUDA");
#endif
}

bool HasCudaDevices(int n) {
#ifdef DEVMESH_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return false;
  return count >= n;
#else
  (void)n;
  return false;
#endif
}

}  // namespace devmesh
