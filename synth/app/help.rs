//! The examples at the end of each subcommand's long help (`synth <command> --help`).

pub const RUN: &str = "\
Examples:
  synth run                                   # the main job: one rule for every model of the embedded H200
                                              # manifest; writes generated/ of the checkout you are in, else
                                              # ./gemm-synth-out/run
  synth run --check                           # CI: fail when generated/ would change
  synth run --max-leaves 24 --out big         # the multi-model job with another leaf budget (its default: 16)
  synth run --dataset my.csv --model llama-3.1-8b --tp 1 --out my-rule
                                              # the single-dataset job on your own measurements (`synth bench`)
  synth run --model qwen3-32b --max-leaves 16 --curve
                                              # one model of the embedded data, and the leaves-versus-quality table
  synth run --model qwen3-32b --tuned aiter_tuned.csv
                                              # also score an AITER tuned CSV as the offline-tuned policy
Every file written starts with the line that regenerates it (`Regenerate with: cargo run --release -- ...`).";

pub const INSTANCES: &str = "\
Examples:
  synth instances                             # the CK blockscale instances (kernelId, tile, pipeline)
  synth instances --format json";

pub const SHAPES: &str = "\
Examples:
  synth shapes --model qwen3-32b --tp 2       # (N, K) of qkv, o, gate_up, down and the dataset's M grid
  synth shapes --model llama-3.1-70b --tp 8 --m-set pow2 --max-m 4096
  synth shapes --spec my_model.toml --m-set log-uniform --count 20 --format csv
  synth shapes --hf-config Mixtral-8x7B/config.json --tp 8   # a model's own Hugging Face config.json";

pub const IMPORT: &str = "\
Examples:
  synth import measurements/mi300x/a8w8_blockscale_tuned_gemm_qwen3_vl_32b.csv
  synth import my.csv --format json           # a `synth bench` journal or an AITER tuned/profile CSV";

pub const BENCH: &str = "\
Examples (on a machine with a GPU, PyTorch and Triton):
  synth bench --model qwen3-32b --tp 2 --out my.csv      # interrupt and rerun to resume
  synth bench --model llama-3.1-8b --tp 1 --m-set decode --out decode.csv
  synth bench --family triton --model qwen3-32b --tp 2 --out triton.csv
                                                         # the kept block-FP8 Triton configs (--configs space,
                                                         # a file of names, or a comma list of names)
Without a GPU:
  synth bench --model qwen3-32b --tp 2 --out my.csv --dry-run --cu-num 304   # the plan's size only
Many GPUs:
  synth bench --model qwen3-32b --tp 2 --out my.csv --gpus 0,1,2,3            # one worker per GPU, one journal
  synth bench --model qwen3-32b --tp 2 --out part3.csv --shard 3/8            # share 3 of 8 machines' runs
  synth merge part*.csv --out my.csv                                          # the shards' journals as one
Then: synth run --dataset my.csv --model qwen3-32b --tp 2   (a triton journal: add --backends triton)";

pub const MERGE: &str = "\
Examples:
  synth merge part1.csv part2.csv part3.csv --out all.csv   # refuses other devices or conflicting cells
  synth merge all.csv late.csv --out all.csv                # merge into an existing journal";

pub const CHECK: &str = "\
Examples:
  synth check my_rule.cpp                     # a rule as an LLM writes it (if/else with return leaves)
  synth check generated/gemm_a8w8_blockscale_heuristic.h --format json
  synth check generated/dispatch.rs --format rust";

pub const COMPARE: &str = "\
Examples:
  synth compare --rule generated/rule.json --published --tuned-sample --held-out
  synth compare --dataset my.csv --model qwen3-32b --tp 2 --rule a.cpp --rule b.rs --csv cmp.csv --svg cmp.svg
  synth compare --tuned aiter_tuned.csv       # AITER's lookup with a tuned CSV (one row per shape)
  synth compare --dataset triton.csv --backends triton --rule rule.json --runtime-default vllm,sglang \\
      --runtime-tuned vllm=measurements/h200/vllm-h200-configs --device-name NVIDIA_H200
                                              # a rule over the triton family against vLLM's and SGLang's default
                                              # configs and vLLM's shipped config files
  synth compare --dataset ck.csv --dataset vendor.csv --backends ck,vendor --rule rule.json --common-shapes
                                              # backends measured on different M sets, on the shapes they share";

pub const SEARCH: &str = "\
Examples:
  synth search                                # built-in proposers; writes ./gemm-synth-out/search
  synth search --agent cmd:\"python3 my_agent.py\" --iterations 8
  synth search --agent openai --base-url https://api.openai.com/v1 --chat-model gpt-4o
  synth search --resume --out run1            # continue the trace in run1/trace.jsonl";

pub const REWRITE: &str = "\
Examples (the CUDA task needs nvcc and an NVIDIA GPU):
  synth rewrite --task examples/swiglu/cuda.toml --agent replay:examples/swiglu/rewrites/cuda --out swiglu-out
  synth rewrite --task my_task.toml --agent cmd:\"python3 my_agent.py\" --out out";

pub const DRIFT: &str = "\
Examples:
  synth drift --rule generated/rule.json --dataset new.csv
  synth drift --rule generated/gemm_a8w8_blockscale_heuristic.h --dataset new.csv --baseline old.csv
  synth drift --rule mixed/rule.json --dataset new-ck.csv --dataset new-vendor.csv --backends ck,vendor";

pub const COMPRESS: &str = "\
Examples:
  synth compress --tuned measurements/mi300x/a8w8_blockscale_tuned_gemm_glm5_1.csv --out glm
                                              # rule + residual table, proved equal to the table at every M
  synth compress --tuned aiter_tuned.csv --rule generated/rule.json --out cmp
                                              # the residual a given rule leaves";

pub const AITER: &str = "\
Examples:
  synth aiter --rule generated/rule.json --out patch   # the patch for a rule (main job: generated/aiter/)
  synth aiter --aiter-dir ~/aiter --check     # does generated/'s patch apply? (or: already applied / which hunk moved)
  synth aiter --aiter-dir ~/aiter             # apply it, all or nothing
  synth aiter --kit kit --rule generated/rule.json     # the check kit (g++ against AITER's dispatch)";

pub const EXPORT: &str = "\
Examples:
  synth export vllm --rule rule.json --model llama-3.1-405b --tp 8 --device-name NVIDIA_H200 --out configs
  synth export sglang --rule rule.json --shapes 4096:7168,7168:2048 --device-name NVIDIA_H200 --out configs
(`synth configs vllm|sglang` writes the same files from the shipped Triton rule, with no --rule.)";

pub const CONFIGS: &str = "\
Examples (no GPU, no measurement: the rules shipped in the binary):
  synth configs vllm --hf-config Qwen3-32B/config.json --tp 2 --device-name NVIDIA_H200 --out configs
                                              # vLLM's block-FP8 Triton config of every layer, every M proved
  synth configs sglang --model llama-3.1-70b --tp 8 --device-name NVIDIA_H200 --out configs
  synth configs aiter --spec my_model.toml --tp 4 --out aiter-files
                                              # the AITER patch, select_kernel.py and the rule's picks per layer
  synth configs vllm --shapes 4096:7168,7168:2048 --device-name NVIDIA_H200 --rule my-rule.json --out configs
--hf-config reads the model's Hugging Face config.json (Llama, Mistral, Qwen2/3, Qwen2/3-MoE, Mixtral,
DeepSeek-V2/V3, MiniCPM3, InternLM2, Phi-3, Gemma); `synth shapes --hf-config FILE --tp T` lists its layers.";
