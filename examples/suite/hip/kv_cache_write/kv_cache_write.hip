// Paged KV-cache write, naive original: one block of BLOCK threads per token copies its key and value
// rows (kv_heads * head_size contiguous elements each) to the cache slot; VEC elements per access when
// the row allows it.
#include "kv_cache_write.h"

// synth:knob BLOCK 32 64 128 256 512 1024
// synth:knob VEC 1 2 4 8
#define BLOCK 32
#define VEC 1

__global__ void __launch_bounds__(BLOCK)
    kv_cache_write_kernel(const uint16_t* __restrict__ key, const uint16_t* __restrict__ value,
                          uint16_t* __restrict__ key_cache, uint16_t* __restrict__ value_cache,
                          const int64_t* __restrict__ slot_mapping, int row) {
    const long long slot = slot_mapping[blockIdx.x];
    if (slot < 0) return;
    const uint16_t* k = key + (size_t)blockIdx.x * row;
    const uint16_t* v = value + (size_t)blockIdx.x * row;
    uint16_t* kc = key_cache + (size_t)slot * row;  // [block, offset] flattens to the slot
    uint16_t* vc = value_cache + (size_t)slot * row;
    const bool vec = row % VEC == 0 && aligned_to(k, 2 * VEC) && aligned_to(v, 2 * VEC) &&
                     aligned_to(kc, 2 * VEC) && aligned_to(vc, 2 * VEC);
    if (vec) {
        for (int i = threadIdx.x * VEC; i < row; i += BLOCK * VEC) {
            uint16_t a[VEC], b[VEC];
            load_vec(a, k + i);
            load_vec(b, v + i);
            store_vec(kc + i, a);
            store_vec(vc + i, b);
        }
    } else {
        for (int i = threadIdx.x; i < row; i += BLOCK) {
            kc[i] = k[i];
            vc[i] = v[i];
        }
    }
}

gpuError_t kv_cache_write_launch(const uint16_t* key, const uint16_t* value, uint16_t* key_cache,
                                 uint16_t* value_cache, const int64_t* slot_mapping, int tokens, int kv_heads,
                                 int head_size, int block_size, gpuStream_t stream) {
    if (tokens == 0 || kv_heads == 0 || head_size == 0) return gpuSuccess;
    if (block_size <= 0) return GPU(ErrorInvalidValue);
    kv_cache_write_kernel<<<tokens, BLOCK, 0, stream>>>(key, value, key_cache, value_cache, slot_mapping,
                                                        kv_heads * head_size);
    return GPU(GetLastError)();
}
