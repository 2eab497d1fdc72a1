#include "core/kquants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"

namespace shrike {

const int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                 1,    13,   25,  38,  53,  69,  89,  113};

void kquant_scale_min(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {  // the low 4 bits in byte j + 4, the high 2 bits on top of bytes j - 4 (scale) and j
    *scale = uint8_t((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
    *min = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

namespace {

// The inverse of kquant_scale_min for 8 pairs of 6-bit values.
void pack_scale_min(const uint8_t* sc, const uint8_t* m, uint8_t* q) {
  std::memset(q, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      q[j] |= sc[j] & 63;
      q[j + 4] |= m[j] & 63;
    } else {
      q[j + 4] = uint8_t((sc[j] & 0xf) | ((m[j] & 0xf) << 4));
      q[j - 4] |= uint8_t((sc[j] >> 4) << 6);
      q[j] |= uint8_t((m[j] >> 4) << 6);
    }
  }
}

int nearest(float v) {
  return int(std::nearbyint(v));
}

// Q4_K / Q5_K: per sub-block of 32, scale (max - min) / levels and minimum -min (min <= 0, so
// zero stays representable), both quantised to 6 bits against the super-block's largest (the
// scale rounded up), then
// the codes against the stored values. Writes d, dmin, the packed scales and q[256].
void quantize_asymmetric(const float* x, int levels, uint16_t* d_bits, uint16_t* dmin_bits,
                         uint8_t* packed, uint8_t* q) {
  float scale[8], min[8], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* s = x + 32 * j;
    float lo = std::min(0.0f, s[0]), hi = s[0];
    for (int l = 1; l < 32; ++l) {
      lo = std::min(lo, s[l]);
      hi = std::max(hi, s[l]);
    }
    scale[j] = (hi - lo) / float(levels);
    min[j] = -lo;
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, min[j]);
  }
  *d_bits = fp32_to_fp16(max_scale / 63.0f);
  *dmin_bits = fp32_to_fp16(max_min / 63.0f);
  const float d = fp16_to_fp32(*d_bits), dmin = fp16_to_fp32(*dmin_bits);
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    // Rounded up, so the sub-block's range stays covered and no code is clamped.
    sc[j] = uint8_t(d > 0 ? std::clamp(int(std::ceil(scale[j] / d)), 0, 63) : 0);
    m[j] = uint8_t(dmin > 0 ? std::clamp(nearest(min[j] / dmin), 0, 63) : 0);
    const float es = d * float(sc[j]), em = dmin * float(m[j]);
    for (int l = 0; l < 32; ++l)
      q[32 * j + l] =
          uint8_t(es > 0 ? std::clamp(nearest((x[32 * j + l] + em) / es), 0, levels) : 0);
  }
  pack_scale_min(sc, m, packed);
}

}  // namespace

void dequantize_q2_k(const BlockQ2_K* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i, ++b) {
    const float d = fp16_to_fp32(b->d), dmin = fp16_to_fp32(b->dmin);
    const uint8_t* q = b->qs;
    int is = 0;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part) {  // q[0..15], then q[16..31]
          const uint8_t sc = b->scales[is++];
          const float dl = d * float(sc & 0xf), ml = dmin * float(sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * float((q[16 * part + l] >> shift) & 3) - ml;
        }
      }
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i, ++b) {
    // 16 6-bit scales: the low 4 bits are nibbles of bytes 0..7 (sub-blocks 0..7 low, 8..15
    // high), the high 2 bits are pairs of bytes 8..11.
    int8_t scales[16];
    for (int j = 0; j < 16; ++j) {
      const int lo = (b->scales[j % 8] >> (4 * (j / 8))) & 0xf;
      const int hi = (b->scales[8 + j % 4] >> (2 * (j / 4))) & 3;
      scales[j] = int8_t(lo | (hi << 4));
    }
    const float d = fp16_to_fp32(b->d);
    const uint8_t* q = b->qs;
    uint8_t m = 1;
    int is = 0;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m = uint8_t(m << 1)) {
        for (int part = 0; part < 2; ++part) {
          const float dl = d * float(scales[is++] - 32);
          for (int l = 0; l < 16; ++l) {
            const int k = 16 * part + l;
            const int v = ((q[k] >> shift) & 3) - ((b->hmask[k] & m) ? 0 : 4);
            *y++ = dl * float(v);
          }
        }
      }
    }
  }
}

void dequantize_q4_k(const BlockQ4_K* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i, ++b) {
    const float d = fp16_to_fp32(b->d), dmin = fp16_to_fp32(b->dmin);
    for (int j = 0; j < 4; ++j) {  // 64 elements: the low nibbles of qs[32j..], then the high
      const uint8_t* q = b->qs + 32 * j;
      for (int h = 0; h < 2; ++h) {
        uint8_t sc, m;
        kquant_scale_min(2 * j + h, b->scales, &sc, &m);
        const float dl = d * float(sc), ml = dmin * float(m);
        for (int l = 0; l < 32; ++l) *y++ = dl * float((q[l] >> (4 * h)) & 0xf) - ml;
      }
    }
  }
}

void dequantize_q5_k(const BlockQ5_K* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i, ++b) {
    const float d = fp16_to_fp32(b->d), dmin = fp16_to_fp32(b->dmin);
    for (int j = 0; j < 4; ++j) {
      const uint8_t* q = b->qs + 32 * j;
      for (int h = 0; h < 2; ++h) {
        uint8_t sc, m;
        kquant_scale_min(2 * j + h, b->scales, &sc, &m);
        const float dl = d * float(sc), ml = dmin * float(m);
        const int bit = 2 * j + h;  // qh bit of this sub-block
        for (int l = 0; l < 32; ++l) {
          const int v = ((q[l] >> (4 * h)) & 0xf) | (((b->qh[l] >> bit) & 1) << 4);
          *y++ = dl * float(v) - ml;
        }
      }
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i, ++b) {
    const float d = fp16_to_fp32(b->d);
    for (int e = 0; e < 256; ++e) {
      const int half = e / 128, r = e % 128, l = r % 32, quarter = r / 32;
      const uint8_t lo = b->ql[64 * half + l + 32 * (quarter & 1)];
      const int low4 = quarter < 2 ? (lo & 0xf) : (lo >> 4);
      const int high2 = (b->qh[32 * half + l] >> (2 * quarter)) & 3;
      y[e] = d * float(b->scales[e / 16]) * float((low4 | (high2 << 4)) - 32);
    }
    y += 256;
  }
}

void dequantize_iq4_nl(const BlockIQ4_NL* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, ++b, y += 32) {
    const float d = fp16_to_fp32(b->d);
    for (int l = 0; l < 16; ++l) {
      y[l] = d * float(kIq4nlValues[b->qs[l] & 0xf]);
      y[l + 16] = d * float(kIq4nlValues[b->qs[l] >> 4]);
    }
  }
}

void dequantize_iq4_xs(const BlockIQ4_XS* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i, ++b) {
    const float d = fp16_to_fp32(b->d);
    for (int j = 0; j < 8; ++j, y += 32) {
      const int ls =
          ((b->scales_l[j / 2] >> (4 * (j % 2))) & 0xf) | (((b->scales_h >> (2 * j)) & 3) << 4);
      const float dl = d * float(ls - 32);
      const uint8_t* q = b->qs + 16 * j;
      for (int l = 0; l < 16; ++l) {
        y[l] = dl * float(kIq4nlValues[q[l] & 0xf]);
        y[l + 16] = dl * float(kIq4nlValues[q[l] >> 4]);
      }
    }
  }
}

void quantize_q4_k(const float* x, BlockQ4_K* b, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i, ++b, x += kSuperBlock) {
    uint8_t q[256];
    quantize_asymmetric(x, 15, &b->d, &b->dmin, b->scales, q);
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l)
        b->qs[32 * j + l] = uint8_t(q[64 * j + l] | (q[64 * j + 32 + l] << 4));
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* b, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i, ++b, x += kSuperBlock) {
    uint8_t q[256];
    quantize_asymmetric(x, 31, &b->d, &b->dmin, b->scales, q);
    std::memset(b->qh, 0, sizeof(b->qh));
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t a = q[64 * j + l], c = q[64 * j + 32 + l];
        b->qs[32 * j + l] = uint8_t((a & 0xf) | ((c & 0xf) << 4));
        b->qh[l] |= uint8_t(((a >> 4) << (2 * j)) | ((c >> 4) << (2 * j + 1)));
      }
    }
  }
}

void quantize_q6_k(const float* x, BlockQ6_K* b, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i, ++b, x += kSuperBlock) {
    // Per sub-block of 16: the value of largest magnitude maps to -32 (as Q4_0 maps it to -8).
    float scale[16], max_abs = 0;
    for (int s = 0; s < 16; ++s) {
      float amax = 0, mx = 0;
      for (int l = 0; l < 16; ++l) {
        if (std::fabs(x[16 * s + l]) > amax) {
          amax = std::fabs(x[16 * s + l]);
          mx = x[16 * s + l];
        }
      }
      scale[s] = mx / -32.0f;
      max_abs = std::max(max_abs, std::fabs(scale[s]));
    }
    b->d = fp32_to_fp16(max_abs / 127.0f);
    const float d = fp16_to_fp32(b->d);
    std::memset(b->ql, 0, sizeof(b->ql));
    std::memset(b->qh, 0, sizeof(b->qh));
    for (int s = 0; s < 16; ++s)  // magnitudes rounded up, so the range stays covered
      b->scales[s] = int8_t(
          d > 0 ? std::clamp(int(std::copysign(std::ceil(std::fabs(scale[s]) / d), scale[s])), -127,
                             127)
                : 0);
    for (int e = 0; e < 256; ++e) {
      const float es = d * float(b->scales[e / 16]);
      const int q = (es != 0 ? std::clamp(nearest(x[e] / es), -32, 31) : 0) + 32;
      const int half = e / 128, r = e % 128, l = r % 32, quarter = r / 32;
      b->ql[64 * half + l + 32 * (quarter & 1)] |= uint8_t((q & 0xf) << (quarter < 2 ? 0 : 4));
      b->qh[32 * half + l] |= uint8_t((q >> 4) << (2 * quarter));
    }
  }
}

}  // namespace shrike
