// Rotary position embedding, NeoX style, in place on bf16 query and key heads (the interface the harness
// calls; this file is not rewritten). For token t at position p = positions[t], every head h and
// i < half = head_dim / 2, with c = cos_sin[p, i] and s = cos_sin[p, half + i]:
//   x1 = x[t, h, i], x2 = x[t, h, half + i]
//   x[t, h, i] = x1 * c - x2 * s,   x[t, h, half + i] = x2 * c + x1 * s
// q: [tokens, q_heads, head_dim], k: [tokens, kv_heads, head_dim] (bf16, row-major); cos_sin:
// [max_position, head_dim] fp32 (cosines, then sines); head_dim even. Arithmetic in fp32.
#pragma once
#include "common/gpu.h"

gpuError_t rope_launch(const int64_t* positions, uint16_t* q, uint16_t* k, const float* cos_sin, int tokens,
                       int q_heads, int kv_heads, int head_dim, gpuStream_t stream);
