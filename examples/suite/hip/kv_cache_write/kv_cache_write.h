// Paged KV-cache write (the interface the harness calls; this file is not rewritten). Token t's key and
// value rows go to slot s = slot_mapping[t] of the paged caches: block s / block_size, offset
// s % block_size; a negative slot (padding) writes nothing.
//   key_cache[s / block_size, s % block_size, h, d] = key[t, h, d]   (value likewise)
// key, value: [tokens, kv_heads, head_size] bf16; key_cache, value_cache: [num_blocks, block_size,
// kv_heads, head_size] bf16 (the token-major "NHD" layout); slot_mapping: [tokens] int64.
#pragma once
#include "common/gpu.h"

gpuError_t kv_cache_write_launch(const uint16_t* key, const uint16_t* value, uint16_t* key_cache,
                                 uint16_t* value_cache, const int64_t* slot_mapping, int tokens, int kv_heads,
                                 int head_size, int block_size, gpuStream_t stream);
