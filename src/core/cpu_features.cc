#include "core/cpu_features.h"

#include <unistd.h>

#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "core/cpu_features_arch.h"

namespace shrike {
namespace {

// Physical cores from /proc/cpuinfo ("physical id" + "core id" pairs); falls back to the number
// of logical CPUs when the file does not say (aarch64 kernels print neither).
int count_physical_cores(int logical) {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::string line;
  int phys = 0;
  while (std::getline(in, line)) {
    auto value = [&]() { return std::stoi(line.substr(line.find(':') + 1)); };
    if (line.rfind("physical id", 0) == 0) phys = value();
    if (line.rfind("core id", 0) == 0) cores.insert({phys, value()});
  }
  return cores.empty() ? logical : int(cores.size());
}

CpuFeatures detect() {
  CpuFeatures f;
  detail::detect_isa_features(f);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  f.logical_cpus = n > 0 ? int(n) : 1;
  f.physical_cores = count_physical_cores(f.logical_cpus);
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

std::string cpu_features_string() {
  const auto& f = cpu_features();
  std::string s;
  if (f.avx2) s += "avx2 ";
  if (f.avx512) s += "avx512 ";
  if (f.avx512_vnni) s += "avx512_vnni ";
  if (f.avx512_bf16) s += "avx512_bf16 ";
  if (f.neon) s += "neon ";
  if (f.neon_dotprod) s += "dotprod ";
  if (f.neon_fp16) s += "fp16 ";
  if (f.neon_i8mm) s += "i8mm ";
  if (f.neon_bf16) s += "bf16 ";
  if (s.empty()) s = "scalar ";
  s += "(" + std::to_string(f.physical_cores) + " physical cores, " +
       std::to_string(f.logical_cpus) + " logical)";
  return s;
}

}  // namespace shrike
