/* Shared command-line pieces of the engine command (main.c) and its benchmark (bench.c), in eng_cli.c. */
#ifndef ENG_CLI_H
#define ENG_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

enum { ENG_EXIT_OK = 0, ENG_EXIT_ERROR = 2 };

/* Parses one engine/memory option at argv[*i] (advancing *i past its value) into o / f32.
 * Returns 1 if it was one, 0 if not, -1 on a bad value (message printed). *mem_flag is set when a
 * memory-mode flag was given. */
int eng_cli_option(int argc, char **argv, int *i, eng_opts *o, int *f32, int *mem_flag);
int eng_cli_int(const char *flag, const char *s, long lo, long hi, long *out);
int eng_bench_main(int argc, char **argv);
/* The config of a named benchmark shape (llama3-8b, llama3-1b, tiny, qwen3.5-9b,
 * tiny-hybrid); eng_shape_json: the same as the HF
 * config.json text it is parsed from (what bench/peer_hf.py builds its LlamaConfig from). */
int eng_shape_config(const char *name, rc_config *cfg, rc_err *e);
int eng_shape_json(const char *name, char *json, size_t cap, rc_err *e);

#endif
