/* The one table of config.json fields: every field a real checkpoint's config can carry, classified with its
 * reason (math we implement, math refused by name, or metadata that cannot change the forward pass). */
#include "config_fields.h"

#include <string.h>

#define MATH(name, why) {name, RC_FIELD_MATH, NULL, why},
#define REFUSE(name, why) {name, RC_FIELD_REFUSED, NULL, why},
#define META(name, types, why) {name, RC_FIELD_META, types, why},

static const rc_config_field fields[] = {
    /* ---- math we implement (read and range-checked by the parser of each model_type that has it) ---- */
    MATH("vocab_size", "rows of the embedding and the LM head")
    MATH("hidden_size", "the residual width")
    MATH("intermediate_size", "the MLP width")
    MATH("num_hidden_layers", "the number of decoder layers")
    MATH("num_attention_heads", "query heads")
    MATH("num_key_value_heads", "K/V heads (grouped-query attention)")
    MATH("head_dim", "width of a head; also the attention scale head_dim^-0.5")
    MATH("rms_norm_eps", "the epsilon of every RMSNorm")
    MATH("hidden_act", "the MLP activation (silu, gelu_pytorch_tanh)")
    MATH("hidden_activation", "gemma3 / gemma4's name for hidden_act")
    MATH("attention_bias", "biases on the q/k/v/o projections")
    MATH("mlp_bias", "llama: biases on the MLP projections")
    MATH("tie_word_embeddings", "the LM head is the embedding matrix")
    MATH("rope_theta", "RoPE base (legacy top-level spelling)")
    MATH("rope_parameters", "RoPE type and parameters: default, linear, llama3, yarn (and gemma4's proportional); gemma: "
         "one entry per layer type")
    MATH("rope_scaling", "the legacy spelling of rope_parameters")
    MATH("partial_rotary_factor", "qwen3_5: the rotated fraction of each head")
    MATH("original_max_position_embeddings", "llama3 / yarn: the pre-extension context (wins over rope_parameters')")
    MATH("layer_types", "per-layer mixer / attention kind")
    MATH("use_sliding_window", "qwen3: must be false (sliding-window qwen3 not implemented)")
    MATH("sliding_window", "gemma3 / gemma4: window of sliding layers; qwen3: inert while use_sliding_window is false; "
         "mistral: must be null")
    MATH("max_window_layers", "qwen3: inert while use_sliding_window is false")
    MATH("full_attention_interval", "qwen3_5: every n-th layer is full attention")
    MATH("linear_num_key_heads", "qwen3_5: gated delta net key heads")
    MATH("linear_num_value_heads", "qwen3_5: gated delta net value heads")
    MATH("linear_key_head_dim", "qwen3_5: gated delta net key width")
    MATH("linear_value_head_dim", "qwen3_5: gated delta net value width")
    MATH("linear_conv_kernel_dim", "qwen3_5: causal conv kernel")
    MATH("text_config", "qwen3_5, gemma4: the text model's config")
    MATH("global_head_dim", "gemma4: head width of full-attention layers")
    MATH("num_global_key_value_heads", "gemma4: K/V heads of full layers (only with attention_k_eq_v)")
    MATH("vocab_size_per_layer_input", "gemma4: rows of the per-layer embedding table")
    MATH("hidden_size_per_layer_input", "gemma4: per-layer embedding width (0 / null: none)")
    MATH("final_logit_softcapping", "gemma3 / gemma4: logits = c tanh(logits / c)")
    MATH("per_layer_config", "gemma4: per-layer head_dim / K/V heads overrides")
    MATH("use_bidirectional_attention", "gemma4: null or \"vision\" (changes nothing for text input); gemma3: false; "
         "else refused")
    MATH("attention_k_eq_v", "gemma4: must be false (V = K projection not implemented)")
    MATH("num_kv_shared_layers", "gemma4: must be 0 (KV sharing across layers not implemented)")
    MATH("enable_moe_block", "gemma4: must be false (mixture of experts not implemented)")
    MATH("use_double_wide_mlp", "gemma4: must be false (not implemented)")
    MATH("num_experts", "gemma4: read only with enable_moe_block")
    MATH("top_k_experts", "gemma4: read only with enable_moe_block")
    MATH("moe_intermediate_size", "gemma4: read only with enable_moe_block")
    MATH("query_pre_attn_scalar", "gemma3: the attention scale is query_pre_attn_scalar^-0.5")
    MATH("rope_local_base_freq", "gemma3: the RoPE base of sliding layers (legacy spelling; default 10000)")
    MATH("sliding_window_pattern", "gemma3: every n-th layer is full when layer_types is absent")
    /* ---- math refused by name ---- */
    REFUSE("attn_logit_softcapping", "attention logit softcapping (gemma2)")
    REFUSE("attention_chunk_size", "chunked local attention (llama4)")
    REFUSE("no_rope_layers", "layers without RoPE (smollm3, llama4)")
    REFUSE("num_local_experts", "mixture of experts")
    REFUSE("num_experts_per_tok", "mixture of experts")
    REFUSE("n_routed_experts", "mixture of experts")
    REFUSE("n_shared_experts", "mixture of experts")
    REFUSE("decoder_sparse_step", "mixture of experts")
    REFUSE("shared_expert_intermediate_size", "mixture of experts")
    REFUSE("mlp_only_layers", "mixture of experts")
    REFUSE("norm_topk_prob", "mixture of experts")
    REFUSE("embedding_multiplier", "scaled embeddings (granite)")
    REFUSE("residual_multiplier", "scaled residual branches (granite)")
    REFUSE("attention_multiplier", "a custom attention scale (granite)")
    REFUSE("logits_scaling", "scaled logits (granite)")
    REFUSE("clip_qkv", "clamped q/k/v projections (olmo)")
    REFUSE("qk_layernorm", "q/k layer norms of another form")
    REFUSE("use_qk_norm", "q/k norms (llama4)")
    MATH("attn_output_gate", "qwen3_5: the sigmoid output gate of attention (true; false refused)")
    META("mtp_num_hidden_layers", "int|null", "multi-token-prediction head: extra layers after the model whose weights "
         "(mtp.*) are skipped; the next-token forward does not use them")
    /* ---- metadata: read, type-checked and ignored; none can change the forward pass ---- */
    META("model_type", "str", "selects the parser; refused there when not implemented")
    META("_sliding_window_pattern", "int|null", "gemma3: HF's record of sliding_window_pattern, recomputed on load "
         "(layer_types, or sliding_window_pattern, decide)")
    META("architectures", "strs|null", "the HF class names that load the checkpoint")
    META("_name_or_path", "str|null", "where the config was loaded from")
    META("_model_name_or_path", "str|null", "the model's name, as a GGUF export writes it")
    META("name_or_path", "str|null", "where the config was loaded from")
    META("transformers_version", "str|null", "the library version that wrote the file")
    META("dtype", "str|null", "storage dtype of the checkpoint; each stage chooses its own precision")
    META("torch_dtype", "str|null", "older spelling of dtype")
    META("use_cache", "bool|null", "whether HF keeps a KV cache; the math is the same")
    META("output_hidden_states", "bool|null", "what HF returns, not what it computes")
    META("output_attentions", "bool|null", "what HF returns, not what it computes")
    META("return_dict", "bool|null", "what HF returns, not what it computes")
    META("torchscript", "bool|null", "export mode of HF")
    META("use_bfloat16", "bool|null", "a TF-era storage hint")
    META("tf_legacy_loss", "bool|null", "training loss")
    META("initializer_range", "num|null", "the std of random initialisation (training)")
    META("attention_dropout", "num|null", "dropout: off at inference")
    META("hidden_dropout", "num|null", "dropout: off at inference")
    META("hidden_dropout_prob", "num|null", "dropout: off at inference")
    META("attention_probs_dropout_prob", "num|null", "dropout: off at inference")
    META("dropout", "num|null", "dropout: off at inference")
    META("embd_pdrop", "num|null", "dropout: off at inference")
    META("resid_pdrop", "num|null", "dropout: off at inference")
    META("router_aux_loss_coef", "num|null", "a training loss weight")
    META("max_position_embeddings", "int|null", "the trained context: a limit on positions, not math (llama3 / yarn "
         "read it as their original context when nothing else gives one)")
    META("pretraining_tp", "int|null", "tensor-parallel degree at pretraining; 1 is the plain forward (others refused)")
    META("quantization_config", "obj|null", "a GGUF export's record (weights already dequantized) or a GPTQ "
         "checkpoint's (read by the weights loader, model/gptq_layout.c); other methods refused")
    META("bos_token_id", "ids|null", "a token id: tokenizer / generation metadata")
    META("eos_token_id", "ids|null", "a token id: tokenizer / generation metadata")
    META("pad_token_id", "ids|null", "a token id: tokenizer / generation metadata")
    META("unk_token_id", "ids|null", "a token id: tokenizer / generation metadata")
    META("sep_token_id", "ids|null", "a token id: tokenizer / generation metadata")
    META("decoder_start_token_id", "ids|null", "a token id: tokenizer / generation metadata")
    META("tokenizer_class", "str|null", "tokenizer metadata")
    META("prefix", "str|null", "tokenizer metadata")
    META("id2label", "obj|null", "classification-head labels (no such head in a causal LM)")
    META("label2id", "obj|null", "classification-head labels (no such head in a causal LM)")
    META("num_labels", "int|null", "classification-head labels (no such head in a causal LM)")
    META("problem_type", "str|null", "classification-head loss (training)")
    META("finetuning_task", "str|null", "training metadata")
    META("task_specific_params", "obj|null", "pipeline defaults")
    META("chunk_size_feed_forward", "int|null", "HF may split the MLP over rows; each row's math is the same")
    META("is_encoder_decoder", "bool|null", "false for a causal LM (the model_type fixes the architecture)")
    META("is_decoder", "bool|null", "architecture flag of encoder models; the model_type fixes ours")
    META("add_cross_attention", "bool|null", "encoder-decoder only; the model_type fixes ours")
    META("cross_attention_hidden_size", "int|null", "encoder-decoder only")
    META("tie_encoder_decoder", "bool|null", "encoder-decoder only")
    META("pruned_heads", "empty|null", "heads removed after training: only an empty set is accepted")
    META("_attn_implementation_autoset", "bool|null", "HF's kernel choice (eager, sdpa, ...): same math")
    META("_commit_hash", "str|null", "hub revision")
    META("audio_config", "obj|null", "an audio tower acts on audio input only; a text-only forward ignores it")
    META("boi_token_id", "ids|null", "marks pixel input; a text-only forward ignores it")
    META("eoi_token_id", "ids|null", "marks pixel input; a text-only forward ignores it")
    META("boa_token_id", "ids|null", "marks audio input; a text-only forward ignores it")
    META("eoa_token_id", "ids|null", "marks audio input; a text-only forward ignores it")
    META("eoa_token_index", "ids|null", "marks audio input; a text-only forward ignores it")
    META("audio_token_id", "ids|null", "placeholder id for audio input; a text-only forward ignores it")
    META("vision_config", "obj|null", "a vision tower acts on pixel input only; a text-only forward ignores it")
    META("image_token_id", "ids|null", "placeholder id for pixel input; a text-only forward ignores it")
    META("video_token_id", "ids|null", "placeholder id for pixel input; a text-only forward ignores it")
    META("vision_start_token_id", "ids|null", "marks pixel input; a text-only forward ignores it")
    META("vision_end_token_id", "ids|null", "marks pixel input; a text-only forward ignores it")
    META("is_llama_config", "bool|null", "nanotron's export flag (SmolLM2)")
    META("rope_interleaved", "bool|null", "nanotron's RoPE pairing flag (SmolLM2); HF ignores it and rotates pairs "
         "(i, i + D/2): only false is accepted")
    META("transformers.js_config", "obj|null", "settings for the transformers.js runtime")
    META("mtp_use_dedicated_embeddings", "bool|null", "multi-token-prediction head (skipped on load)")
    META("max_length", "int|null", "generation default")
    META("min_length", "int|null", "generation default")
    META("do_sample", "bool|null", "generation default")
    META("early_stopping", "bool|str|null", "generation default")
    META("num_beams", "int|null", "generation default")
    META("num_beam_groups", "int|null", "generation default")
    META("temperature", "num|null", "generation default")
    META("top_k", "int|null", "generation default")
    META("top_p", "num|null", "generation default")
    META("typical_p", "num|null", "generation default")
    META("repetition_penalty", "num|null", "generation default")
    META("length_penalty", "num|null", "generation default")
    META("no_repeat_ngram_size", "int|null", "generation default")
    META("num_return_sequences", "int|null", "generation default")
    META("output_scores", "bool|null", "generation default")
    META("return_dict_in_generate", "bool|null", "generation default")
};

const rc_config_field *rc_config_field_at(int i)
{
    return i >= 0 && i < (int)(sizeof fields / sizeof fields[0]) ? &fields[i] : NULL;
}

const rc_config_field *rc_config_field_find(const char *name)
{
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (strcmp(fields[i].name, name) == 0)
            return &fields[i];
    return NULL;
}

const char *rc_field_class_name(rc_field_class c)
{
    switch (c) {
    case RC_FIELD_MATH: return "math";
    case RC_FIELD_REFUSED: return "refused";
    case RC_FIELD_META: return "metadata";
    }
    return "?";
}
