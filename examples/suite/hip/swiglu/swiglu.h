// SwiGLU over bf16, the examples/swiglu task's kernel (the interface the harness calls; this file is not
// rewritten):
//   out[r, c] = SiLU(gate_up[r, c]) * gate_up[r, cols + c],   SiLU(x) = x / (1 + exp(-x))
// gate_up: [rows, 2*cols] (the fused gate|up projection), out: [rows, cols], row-major.
#pragma once
#include "common/gpu.h"

gpuError_t swiglu_launch(const uint16_t* gate_up, uint16_t* out, int rows, int cols, gpuStream_t stream);
