/* libFuzzer target: bytes -> a .gguf file -> rc_gguf_load_model (header, key/values, tensor infos, the llama,
 * gemma3 or qwen3 config, every tensor dequantized) and rc_text_load_gguf (the tokenizer from its metadata), then
 * fuzz_text_roundtrip through that tokenizer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "fuzz_text.h"
#include "config.h"
#include "gguf.h"
#include "quant.h"
#include "tensor.h"
#include "text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, "gguf");
    rc_config cfg;
    rc_tensors s = {0};
    rc_quant q;
    rc_err e = {0};
    memset(&cfg, 0, sizeof cfg);
    memset(&q, 0, sizeof q);
    rc_gguf_load_model(path, &cfg, &s, &q, &e);
    rc_tensors_free(&s);
    rc_quant_free(&q);
    rc_config_free(&cfg);
    rc_text t;
    if (!rc_text_load_gguf(&t, path, &e)) {
        fuzz_text_roundtrip(t.tok);
        rc_text_free(&t);
    }
    unlink(path);
    return 0;
}
