// One stream per CUDA device, and the calling thread's choice of current stream.
//
// Lockstep queues all of a device's work on a stream it creates itself (non-blocking, so it
// never waits on the legacy default stream that other libraries may use). A thread may make
// another stream current for a while (set_current_stream): DataParallel's replicas sharing a
// GPU do, and chapter 4's communication stream will.
#include <cuda_runtime.h>

#include <array>
#include <mutex>

#include "core/cuda/check.cuh"
#include "core/cuda/launch.cuh"
#include "core/cuda_context.h"

namespace lockstep::cuda {

namespace {

constexpr int kMaxDevices = 64;

void check_device(Device device, const char* what) {
  LOCKSTEP_CHECK(device.is_cuda(), what, ": expected a CUDA device, got ", device);
  LOCKSTEP_CHECK(device.index() < cuda_device_count() && device.index() < kMaxDevices, "cannot use ", device,
                 ": this machine has ", cuda_device_count(), " CUDA device(s) (use --device cpu)");
}

// Lockstep's own stream of each device, created on first use and kept for the whole run.
cudaStream_t own_stream(int index) {
  static std::array<std::once_flag, kMaxDevices> created;
  static std::array<cudaStream_t, kMaxDevices> streams{};
  std::call_once(created[index], [index] {
    DeviceGuard guard(Device::cuda(index));
    LOCKSTEP_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[index], cudaStreamNonBlocking));
  });
  return streams[index];
}

// A per-thread override; nullptr means "Lockstep's own stream".
thread_local std::array<cudaStream_t, kMaxDevices> current_override{};

}  // namespace

StreamHandle current_stream(Device device) {
  check_device(device, "current_stream");
  cudaStream_t chosen = current_override[device.index()];
  return chosen != nullptr ? chosen : own_stream(device.index());
}

void set_current_stream(Device device, StreamHandle stream) {
  check_device(device, "set_current_stream");
  current_override[device.index()] = static_cast<cudaStream_t>(stream);
}

void synchronize(Device device) {
  check_device(device, "synchronize");
  DeviceGuard guard(device);
  LOCKSTEP_CUDA_CHECK(cudaStreamSynchronize(stream_for(device)));
}

std::string device_name(Device device) {
  check_device(device, "device_name");
  cudaDeviceProp properties{};
  LOCKSTEP_CUDA_CHECK(cudaGetDeviceProperties(&properties, device.index()));
  return properties.name;
}

}  // namespace lockstep::cuda
