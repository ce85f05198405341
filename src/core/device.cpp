#include "core/device.h"

#include "core/cuda/api.h"
#include "core/error.h"

namespace lockstep {

Device::Device(DeviceType type, int index) : type_(type), index_(type == DeviceType::CPU ? 0 : index) {
  LOCKSTEP_CHECK(index >= 0, "Device: index must be >= 0, got ", index);
}

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  // "cuda:N": everything after the colon must be a non-negative number.
  const std::string prefix = "cuda:";
  if (text.compare(0, prefix.size(), prefix) == 0 && text.size() > prefix.size()) {
    const std::string digits = text.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") == std::string::npos) return cuda(std::stoi(digits));
  }
  throw Error("unknown device '" + text + "': expected cpu, cuda or cuda:N");
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index_); }

std::ostream& operator<<(std::ostream& out, const Device& device) { return out << device.str(); }

}  // namespace lockstep

namespace lockstep::detail {

void throw_built_without_cuda(const char* what) {
  throw Error(ErrorKind::NoCudaDevice,
              concat(what, ": Lockstep was built without CUDA; install the CUDA toolkit and rebuild, or use "
                           "Device::cpu()"));
}

}  // namespace lockstep::detail
