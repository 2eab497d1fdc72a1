// Load-test traces: Azure 2023 CSV, Mooncake JSONL and shrike's own JSONL, told apart by content,
// then the window/speed-up transform the CLI applies.
#include <cstdint>
#include <string>

#include "core/file_buffer.h"
#include "fuzz_input.h"
#include "loadtest/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shrike;
  try {
    auto entries = loadtest::parse_trace(std::string(fuzz::as_text(data, size)), "trace");
    (void)loadtest::transform_trace(std::move(entries), 2.0, 0.5, 0.0, 0.0);
  } catch (const FileError&) {
  }
  return 0;
}
