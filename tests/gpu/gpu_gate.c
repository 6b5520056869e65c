/* Runs the command in its arguments when a CUDA device is present, else exits 77 (SKIP). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gpu_skip.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gpu_gate PROGRAM [ARGS...]\n");
        return 2;
    }
    gpu_skip_unless_present(argv[1]);
    fflush(stdout);
    execv(argv[1], argv + 1);
    perror(argv[1]);
    return 2;
}
