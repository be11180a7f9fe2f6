// Matrix transpose over fp32 (the interface the harness calls; this file is not rewritten):
//   out[c, r] = in[r, c],  in: [rows, cols] row-major, out: [cols, rows] row-major.
#pragma once
#include "common/gpu.h"

gpuError_t transpose_launch(const float* in, float* out, int rows, int cols, gpuStream_t stream);
