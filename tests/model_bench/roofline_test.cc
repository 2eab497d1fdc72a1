#include "model_bench/roofline.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;
using shrike::model_bench::bandwidth_probe_bytes;
using shrike::model_bench::last_level_cache_bytes;

namespace {

// A fake sysfs cache directory: index0.. with level, type and size files.
void add_cache(const fs::path& dir, int index, int level, const std::string& type,
               const std::string& size) {
  const fs::path d = dir / ("index" + std::to_string(index));
  fs::create_directories(d);
  std::ofstream(d / "level") << level << "\n";
  std::ofstream(d / "type") << type << "\n";
  std::ofstream(d / "size") << size << "\n";
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("shrike_roofline_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST(Roofline, LastLevelCacheIsTheHighestLevelsDataOrUnifiedSize) {
  const fs::path d = fresh_dir("xeon");
  add_cache(d, 0, 1, "Data", "48K");
  add_cache(d, 1, 1, "Instruction", "64K");
  add_cache(d, 2, 2, "Unified", "2048K");
  add_cache(d, 3, 3, "Unified", "491520K");  // read off a 2026 Xeon VM: 480 MiB
  EXPECT_EQ(last_level_cache_bytes(d.string()), size_t(491520) << 10);
  fs::remove_all(d);

  const fs::path m = fresh_dir("units");
  add_cache(m, 0, 1, "Data", "32K");
  add_cache(m, 1, 2, "Unified", "1M");
  EXPECT_EQ(last_level_cache_bytes(m.string()), size_t(1) << 20);
  fs::remove_all(m);
}

TEST(Roofline, UnreadableCacheInformationIsZero) {
  EXPECT_EQ(last_level_cache_bytes("/nonexistent/shrike/cache"), 0u);
  const fs::path d = fresh_dir("junk");
  add_cache(d, 0, 3, "Unified", "lots");     // no number: skipped
  add_cache(d, 1, 4, "Instruction", "64M");  // instruction caches never count
  EXPECT_EQ(last_level_cache_bytes(d.string()), 0u);
  fs::remove_all(d);
}

TEST(Roofline, TheProbeIsLargerThanTheCache) {
  EXPECT_EQ(bandwidth_probe_bytes(0), size_t(512) << 20);
  EXPECT_EQ(bandwidth_probe_bytes(size_t(32) << 20), size_t(512) << 20);
  EXPECT_EQ(bandwidth_probe_bytes(size_t(480) << 20), size_t(960) << 20);
}
