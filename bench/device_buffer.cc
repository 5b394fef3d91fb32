#include "bench/device_buffer.h"

#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#ifdef DEVMESH_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace devmesh {
namespace {

class HostBuffer : public DeviceBuffer {
 public:
  HostBuffer(std::unique_ptr<char[]> data, size_t bytes)
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
  std::unique_ptr<char[]> data_;
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
    std::unique_ptr<char[]> data(new (std::nothrow) char[bytes]);
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
