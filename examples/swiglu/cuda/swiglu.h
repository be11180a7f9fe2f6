// SwiGLU activation, the kernel interface the test harness calls (this file is not rewritten).
//
//   out[r, c] = SiLU(gate_up[r, c]) * gate_up[r, cols + c],   SiLU(x) = x / (1 + exp(-x))
//
// gate_up: [rows, 2*cols] bf16, row-major (the fused gate|up projection output of an LLM MLP: the gate
// half is columns 0..cols-1, the up half columns cols..2*cols-1 of the same row).
// out:     [rows, cols] bf16, row-major.
// The launcher returns the launch error (cudaSuccess when the kernel was queued on `stream`).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

cudaError_t swiglu_launch(const __nv_bfloat16* gate_up, __nv_bfloat16* out, int rows, int cols,
                          cudaStream_t stream);
