/// \file
/// Where a tensor lives: the CPU, or one CUDA device `cuda:N`.
#pragma once

#include <ostream>
#include <string>

namespace lockstep {

/// The kinds of device Lockstep knows about.
enum class DeviceType { CPU, CUDA };

/// A device: its type and, for CUDA, its index (`cuda:0`, `cuda:1`, ...). Like torch.device.
///
/// \see @ref chapter1 "Chapter 1: Tensors, autograd and devices", which introduces it.
class Device {
 public:
  /// The CPU (the default device).
  Device() = default;
  /// A device of the given type; `index` is the GPU number for CUDA and 0 for the CPU.
  Device(DeviceType type, int index = 0);
  /// Parses "cpu", "cuda" (meaning cuda:0) or "cuda:N"; throws a clear error otherwise.
  static Device parse(const std::string& text);
  /// The CPU device.
  static Device cpu() { return Device(DeviceType::CPU); }
  /// The CUDA device with this index.
  static Device cuda(int index = 0) { return Device(DeviceType::CUDA, index); }

  /// Whether this is the CPU.
  bool is_cpu() const { return type_ == DeviceType::CPU; }
  /// Whether this is a CUDA device.
  bool is_cuda() const { return type_ == DeviceType::CUDA; }
  /// The device type.
  DeviceType type() const { return type_; }
  /// The device index (always 0 for the CPU).
  int index() const { return index_; }
  /// "cpu" or "cuda:N", as PyTorch prints it.
  std::string str() const;

  /// Devices are equal when type and index match.
  bool operator==(const Device& other) const { return type_ == other.type_ && index_ == other.index_; }
  /// Negation of operator==.
  bool operator!=(const Device& other) const { return !(*this == other); }

 private:
  DeviceType type_ = DeviceType::CPU;
  int index_ = 0;
};

/// Prints the device as str() does.
std::ostream& operator<<(std::ostream& out, const Device& device);

/// Number of usable CUDA devices; 0 when Lockstep was built without CUDA or when the driver
/// reports no device or fails (queried once, then remembered).
int cuda_device_count();

/// Whether Lockstep was compiled with its CUDA backend.
bool built_with_cuda();

}  // namespace lockstep
