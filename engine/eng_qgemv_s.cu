/* The k_qgemv_s variants of the quantized decode GEMV (eng_qgemv_k.cuh): their own unit, so they compile beside
 * the others. Built with -fmad=false. */
#include "eng_qgemv_k.cuh"

const QVariant eng_qgemv_vs[] = {
    /* k_qgemv_s: s<outputs a warp>u<ring>w<warps a block>; x in shared memory, scales in the ring */
    {"s1u8w8", launch_sq<1, 8, 8, false>, launch_sq<1, 8, 8, true>, false,
     launch_sn<1, 8, 8, false>, launch_sn<1, 8, 8, true>},
    {"s1u8w16", launch_sq<1, 8, 16, false>, launch_sq<1, 8, 16, true>, false,
     launch_sn<1, 8, 16, false>, launch_sn<1, 8, 16, true>},
    {"s2u4w8", launch_sq<2, 4, 8, false>, launch_sq<2, 4, 8, true>, false,
     launch_sn<2, 4, 8, false>, launch_sn<2, 4, 8, true>},
    {"s2u4w16", launch_sq<2, 4, 16, false>, launch_sq<2, 4, 16, true>, false,
     launch_sn<2, 4, 16, false>, launch_sn<2, 4, 16, true>},
    {"s1u4w8", launch_sq<1, 4, 8, false>, launch_sq<1, 4, 8, true>, false,
     launch_sn<1, 4, 8, false>, launch_sn<1, 4, 8, true>},
    {"s1u4w16", launch_sq<1, 4, 16, false>, launch_sq<1, 4, 16, true>, false,
     launch_sn<1, 4, 16, false>, launch_sn<1, 4, 16, true>},
    {"s2u2w8", launch_sq<2, 2, 8, false>, launch_sq<2, 2, 8, true>, false,
     launch_sn<2, 2, 8, false>, launch_sn<2, 2, 8, true>},
    {"s1u2w16", launch_sq<1, 2, 16, false>, launch_sq<1, 2, 16, true>, false,
     launch_sn<1, 2, 16, false>, launch_sn<1, 2, 16, true>},
    /* the same with n: high nibbles under 2^19 (dqh), addresses advanced by the loop (k_qgemv_s's NQ) */
    {"s1u2w16n", launch_sq<1, 2, 16, false, true>, launch_sq<1, 2, 16, true, true>, false,
     launch_sn<1, 2, 16, false, true>, launch_sn<1, 2, 16, true, true>},
    {"s1u4w16n", launch_sq<1, 4, 16, false, true>, launch_sq<1, 4, 16, true, true>, false,
     launch_sn<1, 4, 16, false, true>, launch_sn<1, 4, 16, true, true>},
    /* the same walking several row sets a warp (k_qgemv_s's MR): r the fewest for one wave, 3 three (a test of the
     * walk's row-set boundaries; both fall back to the n loops where the lanes' block counts differ). s1u2w16nr and
     * s2u2w8nr measured slower than s1u4w16nr (session 8) and were dropped */
    {"s1u4w16nr", launch_sq<1, 4, 16, false, true, 0>, launch_sq<1, 4, 16, true, true, 0>, false,
     launch_sn<1, 4, 16, false, true, 0>, launch_sn<1, 4, 16, true, true, 0>},
    {"s1u2w16n3", launch_sq<1, 2, 16, false, true, 3>, launch_sq<1, 2, 16, true, true, 3>, false,
     launch_sn<1, 2, 16, false, true, 3>, launch_sn<1, 2, 16, true, true, 3>},
    {"s2u2w8n", launch_sq<2, 2, 8, false, true>, launch_sq<2, 2, 8, true, true>, false,
     launch_sn<2, 2, 8, false, true>, launch_sn<2, 2, 8, true, true>},
};
const int eng_qgemv_nvs = (int)(sizeof eng_qgemv_vs / sizeof eng_qgemv_vs[0]);
