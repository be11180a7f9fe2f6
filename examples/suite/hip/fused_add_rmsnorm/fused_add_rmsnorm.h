// Fused residual add + RMSNorm over bf16 rows, in place (the interface the harness calls; this file is
// not rewritten):
//   residual[r, i] = bf16(x[r, i] + residual[r, i])
//   x[r, i]        = bf16(residual[r, i] / sqrt(mean_i(residual[r, i]^2) + eps) * w[i])
// x, residual: [rows, hidden] row-major; w: [hidden]. Arithmetic in fp32.
#pragma once
#include "common/gpu.h"

gpuError_t fused_add_rmsnorm_launch(uint16_t* x, uint16_t* residual, const uint16_t* w, int rows, int hidden,
                                    float eps, gpuStream_t stream);
