// Portable kernels: dequantise each packed row to f32 and take f32 dot products. Exact for the
// float types up to summation order; the quantised types are NOT activation-quantised here.
#include <cstring>
#include <vector>

#include "kernels/matmul_internal.h"

namespace shrike::kernels::detail {

void dequantize_packed_row(DType type, bool bf16_pairs, const uint8_t* panel, int64_t lane,
                           int64_t cols, float* out) {
  if (bf16_pairs) {
    for (int64_t c = 0; c < cols; ++c) {
      uint16_t b;
      std::memcpy(&b, panel + (c / 2) * 64 + lane * 4 + (c % 2) * 2, 2);
      out[c] = bf16_to_fp32(b);
    }
    return;
  }
  switch (type) {
    case DType::F32:
      for (int64_t c = 0; c < cols; ++c) std::memcpy(out + c, panel + (c * kPanel + lane) * 4, 4);
      return;
    case DType::F16:
    case DType::BF16:
      for (int64_t c = 0; c < cols; ++c) {
        uint16_t h;
        std::memcpy(&h, panel + (c * kPanel + lane) * 2, 2);
        out[c] = type == DType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
      }
      return;
    case DType::Q8_0:
      for (int64_t b = 0; b < cols / kQuantBlock; ++b) {
        const uint8_t* o = panel + b * kPanel * int64_t(sizeof(BlockQ8_0));
        uint16_t h;
        std::memcpy(&h, o + lane * 2, 2);
        const float d = fp16_to_fp32(h);
        for (int j = 0; j < 32; ++j) {
          const int q = int(int8_t(o[32 + (j / 4) * 64 + lane * 4 + j % 4] ^ 0x80));
          out[b * 32 + j] = float(q) * d;
        }
      }
      return;
    case DType::Q4_0:
      for (int64_t b = 0; b < cols / kQuantBlock; ++b) {
        const uint8_t* o = panel + b * kPanel * int64_t(sizeof(BlockQ4_0));
        uint16_t h;
        std::memcpy(&h, o + lane * 2, 2);
        const float d = fp16_to_fp32(h);
        for (int j = 0; j < 16; ++j) {
          const uint8_t v = o[32 + (j / 4) * 64 + lane * 4 + j % 4];
          out[b * 32 + j] = float((v & 0x0f) - 8) * d;
          out[b * 32 + j + 16] = float((v >> 4) - 8) * d;
        }
      }
      return;
    case DType::Q8_C: {
      float scale;
      std::memcpy(&scale, panel + lane * 4, 4);
      for (int64_t c = 0; c < cols; ++c) {
        const uint8_t v = panel[kPanel * 4 + c / 32 * 512 + (c % 32) / 4 * 64 + lane * 4 + c % 4];
        out[c] = float(int8_t(v ^ 0x80)) * scale;  // as shrike::dequantize_row computes it
      }
      return;
    }
    case DType::Q4_G128:
      for (int64_t g = 0; g < cols / kQ4G128Block; ++g) {
        const uint8_t* o = panel + g * kPanel * int64_t(sizeof(BlockQ4_G128));
        uint16_t hd, hm;
        std::memcpy(&hd, o + lane * 2, 2);
        std::memcpy(&hm, o + 32 + lane * 2, 2);
        const float d = fp16_to_fp32(hd), m = fp16_to_fp32(hm);
        for (int j = 0; j < 64; ++j) {
          const uint8_t v = o[64 + (j / 4) * 64 + lane * 4 + j % 4];
          out[g * 128 + j] = float(v & 0x0f) * d + m;
          out[g * 128 + j + 64] = float(v >> 4) * d + m;
        }
      }
      return;
    case DType::FP8_E4M3: {
      float scale;
      std::memcpy(&scale, panel + lane * 4, 4);
      for (int64_t c = 0; c < cols; ++c)
        out[c] = fp8_e4m3_to_fp32(panel[kPanel * 4 + c * kPanel + lane]) * scale;
      return;
    }
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: {  // the file row rebuilt, then ggml's dequantisation
      static thread_local std::vector<uint8_t> file_row;
      file_row.resize(size_t(dtype_row_bytes(type, cols)));
      unpack_kquant_row(type, panel, int(lane), cols, file_row.data());
      shrike::dequantize_row(type, file_row.data(), out, cols);
      return;
    }
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
      shrike::dequantize_row(type, panel + lane * dtype_row_bytes(type, cols), out, cols);
      return;
  }
}

namespace {

void gemm_scalar(const GemmArgs& a, int64_t p0, int64_t p1) {
  static thread_local std::vector<float> row;
  row.resize(size_t(a.cols));
  for (int64_t p = p0; p < p1; ++p) {
    for (int64_t lane = 0; lane < kPanel; ++lane) {
      const int64_t r = p * kPanel + lane;
      if (r >= a.rows) break;
      dequantize_packed_row(a.type, a.bf16_pairs, a.w + p * a.panel_bytes, lane, a.cols,
                            row.data());
      for (int64_t t = 0; t < a.n; ++t) {
        const float* x = a.x + t * a.cols;
        float acc[4] = {0, 0, 0, 0};
        int64_t c = 0;
        for (; c + 4 <= a.cols; c += 4)
          for (int j = 0; j < 4; ++j) acc[j] += row[size_t(c + j)] * x[c + j];
        for (; c < a.cols; ++c) acc[0] += row[size_t(c)] * x[c];
        a.y[t * a.rows + r] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
      }
    }
  }
}

}  // namespace

IsaMatmul isa_matmul_scalar() {
  return IsaMatmul{gemm_scalar, nullptr, 0, 1, 0};
}

}  // namespace shrike::kernels::detail
