#include "io/report.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "io/base/atomic_file.h"
#include "io/base/cuda_device.h"
#include "tiepoint/build_info.h"

namespace tiepoint {

Status WriteJson(const std::string& path, const nlohmann::json& value) {
  AtomicFile file(path);
  TIEPOINT_RETURN_IF_ERROR(file.Open());
  file.stream() << value.dump(2) << "\n";
  return file.Commit();
}

long long PeakRssBytes() {
  struct rusage ru;
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<long long>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

nlohmann::json DescribeMachine() {
  nlohmann::json m;
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) m["host"] = host;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) m["cpu"] = line.substr(colon + 2);
      break;
    }
  }
  m["hardware_threads"] = std::thread::hardware_concurrency();
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) {
    m["memory_gib"] = static_cast<double>(pages) * page_size / (1024.0 * 1024.0 * 1024.0);
  }
  std::vector<CudaDeviceInfo> devices;
  if (QueryCudaDevices(&devices).ok()) {
    for (const auto& d : devices) {
      m["gpus"].push_back({{"name", d.name},
                           {"memory_gib", d.total_memory_bytes / (1024.0 * 1024.0 * 1024.0)},
                           {"compute_capability", std::to_string(d.compute_capability_major) +
                                                      "." +
                                                      std::to_string(d.compute_capability_minor)}});
    }
  }
  return m;
}

nlohmann::json DescribeBuild() {
  return {{"version", kVersion},
          {"commit", kGitCommit},
          {"flags", kBuildFlags},
          {"cuda", CudaBuilt()}};
}

}  // namespace tiepoint
