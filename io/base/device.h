// Where an algorithm runs: the CPU reference or a CUDA backend. Picked once, in a
// module's Create() factory; a backend that is not built is a kUnavailable Status there.
#pragma once

#include <string>

#include "io/base/status.h"

namespace tiepoint {

enum class Device { kCpu, kCuda };

inline const char* ToString(Device device) {
  switch (device) {
    case Device::kCpu: return "cpu";
    case Device::kCuda: return "cuda";
  }
  return "unknown";
}

// "cpu" or "cuda"; anything else is kInvalidOptions naming the text.
inline Status DeviceFromString(const std::string& text, Device* device) {
  if (text == "cpu") {
    *device = Device::kCpu;
  } else if (text == "cuda") {
    *device = Device::kCuda;
  } else {
    return Status::InvalidOptions("device '" + text + "': expected cpu or cuda");
  }
  return Status::Ok();
}

}  // namespace tiepoint
