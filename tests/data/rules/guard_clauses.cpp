// Guard-clause style inside a dispatcher function: each `if` without `else` falls through to the
// statements after it.
#include <cstdint>
template <typename DDataType, typename EDataType>
BlockwiseKernel blockscale_dispatch(int M, int N, int K)
{
    if (M <= 16) return {kernel(8), 1};
    if (cdiv(M, 64) * cdiv(N, 128) < 304 && K >= 4096u)
        return BlockscaleChoice{a8w8_blockscale_1x128x128_256x32x256x128_16x16_32x32_1x2_8x32x1_8x32x1_1x32x1x8_8_1x1_intrawave_v1<DDataType, EDataType>, 2};
    /* large M: the 128x128 tile for the square layers */
    if (m > 2048) {
        if (N == 5120) return &a8w8_blockscale_1x128x128_256x128x128x128_16x16_32x32_2x2_8x32x1_8x32x1_1x32x1x8_8_1x1_intrawave_v3<DDataType, EDataType>;
    }
    return a8w8_blockscale_1x128x128_256x128x64x128_16x16_32x32_2x1_8x32x1_8x32x1_1x32x1x8_8_1x1_intrawave_v3<DDataType, EDataType>;
}
