// RMSNorm over bf16 rows (the interface the harness calls; this file is not rewritten):
//   out[r, i] = x[r, i] / sqrt(mean_i(x[r, i]^2) + eps) * w[i]
// x, out: [rows, hidden] row-major; w: [hidden]. Arithmetic in fp32, one rounding to bf16.
#pragma once
#include "common/gpu.h"

gpuError_t rmsnorm_launch(const uint16_t* x, const uint16_t* w, uint16_t* out, int rows, int hidden, float eps,
                          gpuStream_t stream);
