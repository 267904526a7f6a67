#!/usr/bin/env bash
# tfw against PyTorch on one GPU, side by side in one call: the paper's 124M Transformer and
# 124M Tokenformer (experiments/paper/*-scaling-124m.toml), bf16, batch 16 x 1024, trained by
#   1. tfw (`tfw train`: bf16 autocast, its fused kernels, the fused AdamW, no host
#      synchronisation inside a step);
#   2. PyTorch eager, the same models written independently (bench/python_train_step.py:
#      F.scaled_dot_product_attention, fused AdamW, bf16 autocast);
#   3. the same with torch.compile;
#   4. and the MFU of each by one FLOP count, stated here: 6N + 6LCT per token (llm.c's and
#      nanoGPT's: N every parameter, the tied embedding once; L layers, C the width, T the
#      sequence length), against PEAK (default 989e12 FLOP/s, the H100's and H200's dense bf16).
# The figure is the mean time of a step over steps 41-60 of 60 (the first 40 warm up: memory,
# cuBLAS, compilation). tfw: its summary's `time.recent_step` + `time.recent_data` (the last
# 20 steps, with the read-back waits for the device in them; docs/cli.md). PyTorch: the 20
# steps' window with the device synchronised at both ends; the median of CUDA events on each
# step is in the table too. tokens/s = batch x sequence / that mean.
#   bash bench/gpu_vs_pytorch.sh OUTPUT_FOLDER [CONFIG...]
# Environment: TFW (default build/tfw), TFW_PYTHON (python3), PEAK, BATCH (16), CORPUS (gcide)
# and TOKENIZER (gpt2): tfw's data (PyTorch draws random tokens, which costs it nothing),
# BENCH_HOME (tfw's home; default a temporary folder), DEVICE (cuda),
# PRECISION (bf16), WARMUP (40) and MEASURED (20) steps, COMPILE (1; 0 leaves out
# torch.compile), EAGER (1; 0 leaves out PyTorch eager), TFW_ALSO (e.g. "TFW_LOSS_CUDA=fused
# TFW_ROTARY_CUDA=fused": a second tfw row with those settings in its environment, so that
# a switch's gain is measured on the same machine in the same run). With DEVICE=cpu and a small config, it checks itself on a machine without a GPU.
# Writes OUTPUT_FOLDER/gpu-vs-pytorch.md (the table, printed last) and every run's JSON and log.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:?usage: bash bench/gpu_vs_pytorch.sh OUTPUT_FOLDER [CONFIG...]}
shift
mkdir -p "$out"
configs=("$@")
[ ${#configs[@]} -gt 0 ] ||
  configs=("$root/experiments/paper/transformer-scaling-124m.toml" "$root/experiments/paper/tokenformer-scaling-124m.toml")
tfw=${TFW:-$root/build/tfw}
python=${TFW_PYTHON:-python3}
peak=${PEAK:-989e12}
batch=${BATCH:-16}
device=${DEVICE:-cuda}
precision=${PRECISION:-bf16}
warmup=${WARMUP:-40}
measured=${MEASURED:-20}
compile=${COMPILE:-1}
if [ -n "${BENCH_HOME:-}" ]; then  # tfw's home (data shards, checkpoints): never in the output folder
  home=$BENCH_HOME
  mkdir -p "$home"
else
  home=$(mktemp -d)
  trap 'rm -rf "$home"' EXIT
fi
export TFW_GPT2_DIR=${TFW_GPT2_DIR:-$root/build/tokenizers/gpt2}  # where scripts/setup puts it
rows=$out/rows.jsonl
: > "$rows"
status=0

# The table: 6N + 6LCT FLOPs per token with N = the PyTorch model's parameters (the same
# models; tfw's count is printed beside it).
table() {  # rewritten after every run, so that a run cut short by a time limit leaves the rows before it
"$python" - "$rows" "$peak" "$device" "$precision" "$batch" "$warmup" "$measured" > "$out/gpu-vs-pytorch.md" << 'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
peak, device, precision, batch, warmup, measured = float(sys.argv[2]), *sys.argv[3:]
gpu = next((r["gpu"] for r in rows if r.get("gpu")), None)
print(f"# tfw against PyTorch, side by side: {device} ({gpu or 'no GPU name'}), {precision}, batch {batch}")
print()
last = int(warmup) + int(measured)
tfw_window = f"steps {max(1, last - 19)}-{last}"  # tfw's summary keeps the last 20 steps' means
print(f"Mean step over steps {int(warmup) + 1}-{last} (tfw: {tfw_window}); MFU = (6N + 6LCT) x tokens per step / "
      f"step time / {peak:.4g} FLOP/s. The median is of each step's own time (CUDA events on a GPU). Peak GB: the "
      f"most memory held (on a GPU the caching allocator's peak for tensors; on the CPU the process's resident set); "
      f"for tfw, in brackets, what its memory check estimated before the run.")
print()
print("| model | way | ms a step | median ms | tokens/s | MFU (6N+6LCT) | x compiled PyTorch | peak GB | N |")
print("|---|---|---|---|---|---|---|---|---|")
for model in dict.fromkeys(r["model"] for r in rows):
    mine = [r for r in rows if r["model"] == model]
    n = next((r["parameters"] for r in mine if not r["way"].startswith("tfw")), mine[0]["parameters"])
    compiled = next((r["seconds"] for r in mine if r["way"] == "PyTorch compiled"), None)
    for r in mine:
        flops = (6 * n + 6 * r["layers"] * r["d"] * r["seq_len"]) * r["tokens_per_step"]
        median = f"{1e3 * r['median']:.1f}" if r["median"] else "-"
        ratio = f"{compiled / r['seconds']:.2f}x" if compiled else "-"
        count = f"{r['parameters']:,}" + ("" if not r["way"].startswith("tfw") or r["parameters"] == n else f" (PyTorch's {n:,})")
        memory = f"{r['peak_memory'] / 1e9:.2f}" if r.get("peak_memory") else "-"
        if r.get("estimate_memory"):  # tfw's memory check, beside what was held
            memory += f" (check: {r['estimate_memory'] / 1e9:.2f})"
        print(f"| {model} | {r['way']} | {1e3 * r['seconds']:.1f} | {median} | {r['tokens_per_step'] / r['seconds']:,.0f} | "
              f"{100 * flops / r['seconds'] / peak:.1f}% | {ratio} | {memory} | {count} |")
PY
}

for config in "${configs[@]}"; do
  name=$(basename "$config" .toml)
  # 1. tfw. train.log_every = 10 divides the warm-up, so the read-back after step 40 empties
  #    the device's queue and the 20 steps after it are timed from an idle device.
  tfw_ways=(tfw)
  [ -n "${TFW_ALSO:-}" ] && tfw_ways+=("tfw, $TFW_ALSO")
  for way in "${tfw_ways[@]}"; do
    settings=()
    run=$name-tfw
    if [ "$way" != tfw ]; then read -r -a settings <<< "$TFW_ALSO"; run=$name-tfw-also; fi
    if env ${settings[@]+"${settings[@]}"} "$tfw" train "$config" --home "$home" --name "$run" --json \
         --set data.corpus="${CORPUS:-gcide}" --set data.tokenizer="${TOKENIZER:-gpt2}" --set train.device="$device" --set train.precision="$precision" \
         --set train.batch_size="$batch" --set train.max_steps=$((warmup + measured)) --set train.max_tokens=0 \
         --set train.max_flops=0 --set train.warmup_steps=10 --set train.log_every=10 \
         --set train.eval_every=1000000 --set train.checkpoint_every=1000000 --set train.peak_flops="$peak" \
         > "$out/$run.json" 2> "$out/$run.log"; then
      "$python" - "$out/$run.json" "$config" "$name" "$way" >> "$rows" << 'PY'
import json, sys, tomllib
r = json.load(open(sys.argv[1]))
m = tomllib.load(open(sys.argv[2], "rb"))["model"]
seconds = r["time"]["recent_step"] + r["time"]["recent_data"]
tokens = r["tokens"] / r["steps"]
print(json.dumps({"model": sys.argv[3], "way": sys.argv[4], "seconds": seconds, "median": None,
                  "tokens_per_step": tokens, "parameters": r["parameters"], "layers": m["layers"], "d": m["d"],
                  "seq_len": m.get("seq_len", 1024), "peak_memory": r.get("memory", {}).get("peak_bytes"),
                  "estimate_memory": r.get("memory", {}).get("estimate_bytes")}))
PY
    else
      echo "$way failed on $name (see $out/$run.log)" >&2
      tail -5 "$out/$run.log" >&2
      status=1
    fi
    table
  done
  # 2 and 3. PyTorch, eager and compiled.
  ways=()
  [ "${EAGER:-1}" = 1 ] && ways+=(eager)
  [ "$compile" = 1 ] && ways+=(compiled)
  for way in ${ways[@]+"${ways[@]}"}; do
    flags=()
    [ "$way" = compiled ] && flags=(--compile)
    if "$python" "$root/bench/python_train_step.py" "$config" --device "$device" --precision "$precision" \
         --batch-size "$batch" --skip "$warmup" --steps "$measured" "${flags[@]}" \
         > "$out/$name-pytorch-$way.json" 2> "$out/$name-pytorch-$way.log"; then
      "$python" - "$out/$name-pytorch-$way.json" "$config" "$name" "$way" >> "$rows" << 'PY'
import json, sys, tomllib
r = json.load(open(sys.argv[1]))
m = tomllib.load(open(sys.argv[2], "rb"))["model"]
print(json.dumps({"model": sys.argv[3], "way": "PyTorch " + sys.argv[4], "seconds": r["mean_step_seconds"],
                  "median": r["step_seconds"], "tokens_per_step": r["batch_size"] * r["seq_len"],
                  "parameters": r["parameters"], "layers": m["layers"], "d": m["d"], "seq_len": r["seq_len"],
                  "peak_memory": r.get("peak_memory_bytes"), "gpu": r["gpu"]}))
PY
    else
      echo "PyTorch $way failed on $name (see $out/$name-pytorch-$way.log)" >&2
      tail -5 "$out/$name-pytorch-$way.log" >&2
      status=1
    fi
    table
  done
done

cat "$out/gpu-vs-pytorch.md"
exit $status
