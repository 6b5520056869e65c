/* The k_qgemv_mma variants of the quantized decode GEMV (eng_qgemv_k.cuh): their own unit, so they compile beside
 * the others. Built with -fmad=false. */
#include "eng_qgemv_k.cuh"

const QVariant eng_qgemv_vm[] = {
    /* k_qgemv_mma: m<warps a tile's k is split over>[t<tiles a block>]u<ring>; the fallback (s2u2w8) where it
     * does not run. More tiles a block: x's prologue (max, fp16 pieces) paid once for more rows */
    {"m8u4", launch_mq<8, 1, 4, false>, launch_mq<8, 1, 4, true>, true,
     launch_mn<8, 1, 4, false>, launch_mn<8, 1, 4, true>},
    {"m8u8", launch_mq<8, 1, 8, false>, launch_mq<8, 1, 8, true>, true,
     launch_mn<8, 1, 8, false>, launch_mn<8, 1, 8, true>},
    {"m4u8", launch_mq<4, 1, 8, false>, launch_mq<4, 1, 8, true>, true, nullptr, nullptr},
    {"m4t2u4", launch_mq<4, 2, 4, false>, launch_mq<4, 2, 4, true>, true,
     launch_mn<4, 2, 4, false>, launch_mn<4, 2, 4, true>},
    {"m16u2", launch_mq<16, 1, 2, false>, launch_mq<16, 1, 2, true>, true,
     launch_mn<16, 1, 2, false>, launch_mn<16, 1, 2, true>},
    {"m8t2u4", launch_mq<8, 2, 4, false>, launch_mq<8, 2, 4, true>, true,
     launch_mn<8, 2, 4, false>, launch_mn<8, 2, 4, true>},
    {"m4t4u4", launch_mq<4, 4, 4, false>, launch_mq<4, 4, 4, true>, true,
     launch_mn<4, 4, 4, false>, launch_mn<4, 4, 4, true>},
    /* ...o: 64 registers a thread (the launch bound's blocks an SM: 2 of 512 threads, 4 of 256), twice the warps an
     * SM of the 128-register forms (their loads and MMA chains in flight); the same order as the form without o */
    {"m16u2o", launch_mq<16, 1, 2, false, 2>, launch_mq<16, 1, 2, true, 2>, true,
     launch_mn<16, 1, 2, false, 2>, launch_mn<16, 1, 2, true, 2>},
    {"m8u2o", launch_mq<8, 1, 2, false, 4>, launch_mq<8, 1, 2, true, 4>, true,
     launch_mn<8, 1, 2, false, 4>, launch_mn<8, 1, 2, true, 4>},
    {"m8t2u2o", launch_mq<8, 2, 2, false, 2>, launch_mq<8, 2, 2, true, 2>, true,
     launch_mn<8, 2, 2, false, 2>, launch_mn<8, 2, 2, true, 2>},
    /* ...p: persistent (k_qgemv_mma's PER): the grid the device holds at once, each block's units in turn, x's
     * prologue once a block; m8t2u2o's order, so its bits */
    {"m8t2u2op", launch_mq<8, 2, 2, false, 2, true>, launch_mq<8, 2, 2, true, 2, true>, true,
     launch_mn<8, 2, 2, false, 2, true>, launch_mn<8, 2, 2, true, 2, true>},
    /* m8u4's persistent form (128 registers at most: one ring of 4 steps a warp, 8 warps a block) */
    {"m8u4p", launch_mq<8, 1, 4, false, 0, true>, launch_mq<8, 1, 4, true, 0, true>, true,
     launch_mn<8, 1, 4, false, 0, true>, launch_mn<8, 1, 4, true, 0, true>},
};
const int eng_qgemv_nvm = (int)(sizeof eng_qgemv_vm / sizeof eng_qgemv_vm[0]);
