// JSON output files (reports, benchmark results), written atomically.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "io/base/status.h"

namespace tiepoint {

// Writes `value` pretty-printed to `path` through a temporary renamed into place.
Status WriteJson(const std::string& path, const nlohmann::json& value);

// Machine description for reports: host name, CPU model, hardware threads, memory.
nlohmann::json DescribeMachine();

// Peak resident memory of this process so far (getrusage), in bytes; 0 if unknown.
long long PeakRssBytes();

// Build description: version, commit, flags, CUDA built.
nlohmann::json DescribeBuild();

}  // namespace tiepoint
