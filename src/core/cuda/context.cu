// One stream per CUDA device, the calling thread's choice of current stream, side streams, and
// ordering one stream after another.
//
// Lockstep queues a device's work on a stream it creates itself (non-blocking, so it never
// waits on the legacy default stream that other libraries may use). A thread may make another
// stream current for a while (set_current_stream): DataParallel's replicas sharing a GPU make
// their side streams current, and events order them against the main one.
#include <cuda_runtime.h>

#include <array>
#include <mutex>

#include "core/cuda/check.cuh"
#include "core/cuda/device_guard.cuh"
#include "core/cuda/context.h"

namespace lockstep::cuda {

namespace {

constexpr int kMaxDevices = 64;

void check_device(Device device, const char* what) {
  LOCKSTEP_CHECK(device.is_cuda(), what, ": expected a CUDA device, got ", device);
  LOCKSTEP_CHECK_KIND(device.index() < cuda_device_count() && device.index() < kMaxDevices, ErrorKind::NoCudaDevice,
                      "cannot use ", device, ": this machine has ", cuda_device_count(), " CUDA device(s); use "
                      "Device::cpu(), or a device index below cuda_device_count()");
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

// Side streams of each device: up to kMaxSideStreams, created on first use and kept.
constexpr int kMaxSideStreams = 64;

cudaStream_t own_side_stream(int device_index, int index) {
  static std::mutex mutex;
  static std::array<std::array<cudaStream_t, kMaxSideStreams>, kMaxDevices> streams{};
  const std::lock_guard<std::mutex> lock(mutex);
  cudaStream_t& stream = streams[device_index][index];
  if (stream == nullptr) {
    DeviceGuard guard(Device::cuda(device_index));
    LOCKSTEP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  return stream;
}

// A per-thread override; nullptr means "Lockstep's own stream".
thread_local std::array<cudaStream_t, kMaxDevices> current_override{};

}  // namespace

void set_device(Device device) {
  check_device(device, "set_device");
  LOCKSTEP_CUDA_CHECK(cudaSetDevice(device.index()));
}

Device current_device() {
  int index = 0;
  LOCKSTEP_CUDA_CHECK(cudaGetDevice(&index));
  return Device::cuda(index);
}

StreamHandle current_stream(Device device) {
  check_device(device, "current_stream");
  cudaStream_t chosen = current_override[device.index()];
  return chosen != nullptr ? chosen : own_stream(device.index());
}

void set_current_stream(Device device, StreamHandle stream) {
  check_device(device, "set_current_stream");
  current_override[device.index()] = static_cast<cudaStream_t>(stream);
}

StreamHandle side_stream(Device device, int index) {
  check_device(device, "side_stream");
  LOCKSTEP_CHECK(index >= 0 && index < kMaxSideStreams, "side_stream: expected an index from 0 to ",
                 kMaxSideStreams - 1, ", got ", index);
  return own_side_stream(device.index(), index);
}

void stream_wait(Device device, StreamHandle waiting, StreamHandle done) {
  check_device(device, "stream_wait");
  if (waiting == done) return;
  DeviceGuard guard(device);
  // The event only marks a point in `done`'s queue; once `waiting` has been told about it, it
  // can be destroyed (the wait still happens).
  cudaEvent_t event = nullptr;
  LOCKSTEP_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  LOCKSTEP_CUDA_CHECK(cudaEventRecord(event, static_cast<cudaStream_t>(done)));
  LOCKSTEP_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(waiting), event, 0));
  LOCKSTEP_CUDA_CHECK(cudaEventDestroy(event));
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

int compute_capability(Device device) {
  check_device(device, "compute_capability");
  int major = 0, minor = 0;
  LOCKSTEP_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device.index()));
  LOCKSTEP_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device.index()));
  return major * 10 + minor;
}

}  // namespace lockstep::cuda
