/* The integer-MMA variants of the quantized decode GEMV (k_qgemv_mma with INT, eng_qgemv_k.cuh): x as 31-bit fixed
 * point in four int8 digits (B columns 0..3), the codes as int8 (int4: 16 times the nibble), mma.sync.m16n8k32 with
 * exact int32 sums a step; their own unit, so they compile beside the others. Built with -fmad=false. */
#include "eng_qgemv_k.cuh"

const QVariant eng_qgemv_vi[] = {
    /* i<KS>[t<tiles>]u<ring>[o][p]: the m* shapes (eng_qgemv_m.cu) in the integer form; each row's order depends on
     * KS only, so the variants of one KS give the same bits (not the m* ones: another arithmetic) */
    {"i8u4", launch_mq<8, 1, 4, false, 0, false, true>, launch_mq<8, 1, 4, true, 0, false, true>, true,
     launch_mn<8, 1, 4, false, 0, false, true>, launch_mn<8, 1, 4, true, 0, false, true>},
    {"i8t2u4", launch_mq<8, 2, 4, false, 0, false, true>, launch_mq<8, 2, 4, true, 0, false, true>, true,
     launch_mn<8, 2, 4, false, 0, false, true>, launch_mn<8, 2, 4, true, 0, false, true>},
    {"i8t2u2o", launch_mq<8, 2, 2, false, 2, false, true>, launch_mq<8, 2, 2, true, 2, false, true>, true,
     launch_mn<8, 2, 2, false, 2, false, true>, launch_mn<8, 2, 2, true, 2, false, true>},
    {"i16u2o", launch_mq<16, 1, 2, false, 2, false, true>, launch_mq<16, 1, 2, true, 2, false, true>, true,
     launch_mn<16, 1, 2, false, 2, false, true>, launch_mn<16, 1, 2, true, 2, false, true>},
    /* persistent (PER): the grid the device holds at once, x's prologue once a block */
    {"i8u4p", launch_mq<8, 1, 4, false, 0, true, true>, launch_mq<8, 1, 4, true, 0, true, true>, true,
     launch_mn<8, 1, 4, false, 0, true, true>, launch_mn<8, 1, 4, true, 0, true, true>},
};
const int eng_qgemv_nvi = (int)(sizeof eng_qgemv_vi / sizeof eng_qgemv_vi[0]);
