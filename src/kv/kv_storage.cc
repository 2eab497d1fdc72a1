#include "kv/kv_storage.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/dtype.h"

namespace shrike::kv {
namespace {

// Bytes of one block of keys (or values) of a layer, and of its int8 quants; checked so that a
// huge configuration fails with a message instead of wrapping around.
struct BlockBytes {
  size_t block = 0, quants = 0;
};

BlockBytes block_bytes_of(KvFormat f, int64_t block_size, int64_t n_kv_heads, int64_t head_dim,
                          const std::string& describe) {
  const size_t limit = std::numeric_limits<size_t>::max() / 64;
  size_t elems = 1;
  for (const int64_t d : {block_size, n_kv_heads, head_dim}) {
    if (elems > limit / size_t(d)) throw std::invalid_argument("KvStorage: too large: " + describe);
    elems *= size_t(d);
  }
  switch (f) {
    case KvFormat::F32:
      return {elems * 4, 0};
    case KvFormat::F16:
      return {elems * 2, 0};
    case KvFormat::Int8: {
      const size_t quants = (elems + 3) / 4 * 4;  // the f32 scales that follow stay aligned
      return {quants + size_t(block_size) * size_t(n_kv_heads) * 4, quants};
    }
  }
  throw std::invalid_argument("KvStorage: unknown format");
}

// One head's row, converted to the cache's element type.
void put_row(float* dst, const float* src, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}
void put_row(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

// Scatters one position's [n_kv_heads][head_dim] row into head-major blocks.
template <typename T>
void scatter(T* kd, T* vd, const float* k, const float* v, int64_t n_heads, int64_t head_dim,
             int64_t head_stride) {
  for (int64_t h = 0; h < n_heads; ++h) {
    put_row(kd + h * head_stride, k + h * head_dim, head_dim);
    put_row(vd + h * head_stride, v + h * head_dim, head_dim);
  }
}

}  // namespace

const char* kv_format_name(KvFormat f) {
  switch (f) {
    case KvFormat::F32:
      return "f32";
    case KvFormat::F16:
      return "f16";
    case KvFormat::Int8:
      return "int8";
  }
  return "?";
}

size_t kv_row_bytes(KvFormat f, int64_t head_dim) {
  switch (f) {
    case KvFormat::F32:
      return size_t(head_dim) * 4;
    case KvFormat::F16:
      return size_t(head_dim) * 2;
    case KvFormat::Int8:
      return size_t(head_dim) + 4;
  }
  return 0;
}

KvStorage::KvStorage(int64_t n_layers, int64_t n_blocks, int64_t block_size, int64_t n_kv_heads,
                     int64_t head_dim, KvFormat format)
    : KvStorage(n_layers, n_blocks, block_size, n_kv_heads, head_dim,
                std::vector<KvFormat>(size_t(std::max<int64_t>(0, n_layers)), format)) {}

KvStorage::KvStorage(int64_t n_layers, int64_t n_blocks, int64_t block_size, int64_t n_kv_heads,
                     int64_t head_dim, std::vector<KvFormat> layer_formats, Commit commit)
    : n_layers_(n_layers),
      n_blocks_(n_blocks),
      block_size_(block_size),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim) {
  const std::string describe = std::to_string(n_layers) + " layers, " + std::to_string(n_blocks) +
                               " blocks of " + std::to_string(block_size) + ", " +
                               std::to_string(n_kv_heads) + " kv heads of " +
                               std::to_string(head_dim);
  if (n_layers < 1 || n_blocks < 1 || block_size < 1 || n_kv_heads < 1 || head_dim < 1)
    throw std::invalid_argument("KvStorage: every dimension must be >= 1, got " + describe);
  if (int64_t(layer_formats.size()) != n_layers)
    throw std::invalid_argument("KvStorage: " + std::to_string(layer_formats.size()) +
                                " layer formats for " + std::to_string(n_layers) + " layers");
  // Layer after layer, each starting on a cache line; both tensors together must stay
  // addressable in bytes.
  const size_t limit = std::numeric_limits<size_t>::max() / 4;
  size_t offset = 0;
  for (const KvFormat f : layer_formats) {
    const BlockBytes bb = block_bytes_of(f, block_size, n_kv_heads, head_dim, describe);
    if (bb.block > limit / size_t(n_blocks) || offset > limit - bb.block * size_t(n_blocks))
      throw std::invalid_argument("KvStorage: too large: " + describe);
    layers_.push_back({f, bb.block, bb.quants, offset});
    offset = (offset + bb.block * size_t(n_blocks) + 63) / 64 * 64;
    block_bytes_ += 2 * bb.block;
  }
  // Zeroed so that nothing ever reads indeterminate memory; zero bits are 0.0 in every format
  // (int8 quants 0 with scale 0). Commit::Now writes the zeros now, so that the pages are
  // committed when the server starts rather than in the middle of the first requests.
  k_ = Bytes(offset, commit);
  v_ = Bytes(offset, commit);
}

void KvStorage::discard(BlockId from, BlockId to) {
  if (!k_.lazy() || from >= to) return;
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  for (Bytes* m : {&k_, &v_})
    for (int64_t layer = 0; layer < n_layers_; ++layer) {
      const uintptr_t begin = uintptr_t(raw(*m, layer, from)), end = uintptr_t(raw(*m, layer, to));
      const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
      if (first < last) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
    }
}

KvStorage::Bytes::Bytes(size_t n, Commit commit) : n_(n) {
  if (commit == Commit::Now) {
    AlignedBytes b = aligned_alloc_bytes(n);
    std::memset(b.get(), 0, n);
    p_ = b.release();
    return;
  }
  // Anonymous pages read as zero until written. Small pages, so that residency follows the
  // blocks used rather than 2 MiB at a time.
  const size_t len = std::max<size_t>(n, 1);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  madvise(p, len, MADV_NOHUGEPAGE);
  p_ = static_cast<unsigned char*>(p);
  mapped_ = len;
}

KvStorage::Bytes::~Bytes() {
  if (mapped_ > 0)
    munmap(p_, mapped_);
  else
    AlignedFree()(p_);
}

KvStorage::Bytes::Bytes(Bytes&& o) noexcept : p_(o.p_), n_(o.n_), mapped_(o.mapped_) {
  o.p_ = nullptr;
  o.n_ = o.mapped_ = 0;
}

KvStorage::Bytes& KvStorage::Bytes::operator=(Bytes&& o) noexcept {
  if (this != &o) {
    this->~Bytes();
    p_ = o.p_;
    n_ = o.n_;
    mapped_ = o.mapped_;
    o.p_ = nullptr;
    o.n_ = o.mapped_ = 0;
  }
  return *this;
}

size_t KvStorage::block_bytes_for(const std::vector<KvFormat>& layer_formats, int64_t block_size,
                                  int64_t n_kv_heads, int64_t head_dim) {
  return KvStorage(int64_t(layer_formats.size()), 1, block_size, n_kv_heads, head_dim,
                   layer_formats)
      .block_bytes();
}

void KvStorage::wrong_format(int64_t layer, KvFormat want) const {
  throw std::logic_error("KvStorage: " + std::string(kv_format_name(want)) + " access to layer " +
                         std::to_string(layer) + " of format " +
                         kv_format_name(layers_[size_t(layer)].format));
}

void KvStorage::store(int64_t layer, BlockId b, int64_t slot, const float* k, const float* v) {
  if (layer < 0 || layer >= n_layers_ || b < 0 || b >= n_blocks_ || slot < 0 ||
      slot >= block_size_) {
    throw std::out_of_range("KvStorage::store: layer " + std::to_string(layer) + ", block " +
                            std::to_string(b) + ", slot " + std::to_string(slot) + " out of range");
  }
  const int64_t head_stride = block_size_ * head_dim_;
  switch (format(layer)) {
    case KvFormat::F32:
      scatter(keys(layer, b) + slot * head_dim_, values(layer, b) + slot * head_dim_, k, v,
              n_kv_heads_, head_dim_, head_stride);
      break;
    case KvFormat::F16:
      scatter(keys_f16(layer, b) + slot * head_dim_, values_f16(layer, b) + slot * head_dim_, k, v,
              n_kv_heads_, head_dim_, head_stride);
      break;
    case KvFormat::Int8: {
      int8_t* kq = keys_int8(layer, b) + slot * head_dim_;
      int8_t* vq = values_int8(layer, b) + slot * head_dim_;
      float* ks = key_scales(layer, b) + slot;
      float* vs = value_scales(layer, b) + slot;
      for (int64_t h = 0; h < n_kv_heads_; ++h) {
        ks[h * block_size_] =
            kernels::quantize_int8_row(k + h * head_dim_, head_dim_, kq + h * head_stride);
        vs[h * block_size_] =
            kernels::quantize_int8_row(v + h * head_dim_, head_dim_, vq + h * head_stride);
      }
      break;
    }
  }
}

void KvStorage::copy_block(BlockId src, BlockId dst) {
  if (src < 0 || src >= n_blocks_ || dst < 0 || dst >= n_blocks_) {
    throw std::out_of_range("KvStorage::copy_block: block " + std::to_string(src) + " -> " +
                            std::to_string(dst) + " out of range [0, " + std::to_string(n_blocks_) +
                            ")");
  }
  if (src == dst) return;
  // Raw bytes: the copy is exact in every format (int8 scales included).
  for (int64_t layer = 0; layer < n_layers_; ++layer) {
    const size_t bytes = layers_[size_t(layer)].block_bytes;
    std::memcpy(raw(k_, layer, dst), raw(k_, layer, src), bytes);
    std::memcpy(raw(v_, layer, dst), raw(v_, layer, src), bytes);
  }
}

}  // namespace shrike::kv
