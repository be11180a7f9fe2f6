// Row softmax over fp32 (the interface the harness calls; this file is not rewritten):
//   y[r, j] = exp(x[r, j] - max_j x[r, j]) / sum_j exp(x[r, j] - max_j x[r, j])
// x, y: [rows, cols] row-major.
#pragma once
#include "common/gpu.h"

gpuError_t softmax_launch(const float* x, float* y, int rows, int cols, gpuStream_t stream);
