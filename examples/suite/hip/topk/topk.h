// Top-k of each row of fp32 logits (the interface the harness calls; this file is not rewritten).
// vals[r, 0..k) are the k largest values of x[r, :] in descending order and idx[r, 0..k) their column
// indices; equal values are ordered by the smaller index first (a total order, so the answer is unique).
// x: [rows, vocab] row-major; vals: [rows, k] fp32; idx: [rows, k] int32; 1 <= k <= vocab. No NaNs.
#pragma once
#include "common/gpu.h"

gpuError_t topk_launch(const float* x, float* vals, int32_t* idx, int rows, int vocab, int k, gpuStream_t stream);
