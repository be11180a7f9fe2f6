// FP8 per-token-group quantization, the activation side of the block-FP8 GEMM (1 x 128 groups, e4m3)
// (the interface the harness calls; this file is not rewritten). For each token t and group g of 128
// consecutive elements of x[t, :]:
//   amax = max(max |x[t, 128g .. 128g+127]|, 1e-10),  scale[t, g] = amax / 448
//   q[t, i] = e4m3(x[t, i] / scale[t, g])   (round to nearest even, saturated to +-448; e4m3fn codes)
// x: [tokens, hidden] bf16 row-major, hidden a multiple of 128; q: [tokens, hidden] e4m3 bytes; scale:
// [tokens, hidden / 128] fp32 row-major.
#pragma once
#include "common/gpu.h"

#define FP8_GROUP 128

gpuError_t fp8_group_quant_launch(const uint16_t* x, uint8_t* q, float* scale, int tokens, int hidden,
                                  gpuStream_t stream);
