// safetensors: a single file's header, and a sharded checkpoint (model.safetensors.index.json
// naming shards). Input: the index, the separator line, then one shard's bytes; without a
// separator the whole input is one model.safetensors.
#include <cstdint>

#include "core/file_buffer.h"
#include "fuzz_input.h"
#include "safetensors/safetensors.h"

namespace {

void read_all(const shrike::safetensors::Checkpoint& c) {
  for (const std::string& name : c.names()) {
    const auto& t = c.get(name);
    (void)c.file_of(name);
    // Touch the first and last byte: the reader promised they are inside the mapping.
    if (t.bytes) {
      volatile uint8_t a = t.data[0], b = t.data[t.bytes - 1];
      (void)a;
      (void)b;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shrike;
  auto [first, second] = fuzz::split_once(fuzz::as_text(data, size));
  const std::string dir = fuzz::scratch_dir();
  try {
    if (second.data() == nullptr) {
      fuzz::remove_file("model.safetensors.index.json");
      fuzz::write_file("model.safetensors", first);
      read_all(safetensors::Checkpoint::open_dir(dir));
    } else {
      fuzz::remove_file("model.safetensors");
      fuzz::write_file("model.safetensors.index.json", first);
      fuzz::write_file("model-00001-of-00001.safetensors", second);
      read_all(safetensors::Checkpoint::open_dir(dir));
    }
  } catch (const FileError&) {
  }
  return 0;
}
