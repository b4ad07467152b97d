#!/usr/bin/env bash
# A real-GPU sweep launched by specbench, resumable across sessions that start bare.
#
# Usage (where `python3 -c "import sglang"` works and one GPU is free):
#   lab/gpu/h200_sweep.sh RUN_DIR TARGET_DIR DRAFT_DIR [extra `specbench sweep` options]
#
# - RUN_DIR: a new run is started there; a run directory already there is resumed (`--resume`),
#   so a machine that is taken back mid-sweep loses at most the point in progress.
# - TARGET_DIR, DRAFT_DIR: the target model and its EAGLE-3 draft. A `construction.json` beside
#   them (written by a model builder) is copied into RUN_DIR/models/ so the run records how its
#   models were made; MODELS_NOTE (a line of text) goes into RUN_DIR/models/README.md.
# - STOP_AFTER_S (default: none): the sweep is sent SIGINT after this many seconds, keeps every
#   finished point and exits 130, so a time-limited session can tar RUN_DIR before it ends.
# - ATTENTION_BACKEND (default flashinfer): SGLang's --attention-backend. The bundle has no FA3,
#   so the choice is flashinfer (what Hopper servers run when FA3 is not built) or triton; the
#   run's manifest records it with the server command, and its report names it.
# - KERNEL_CACHE (default: none): a .tar.xz of the kernel caches FlashInfer, TVM-FFI, Triton and
#   TorchInductor compile into (~/.cache/flashinfer, ~/.cache/tvm-ffi, ~/.triton,
#   /tmp/torchinductor_$USER). Restored before the sweep when the file exists, written after it,
#   so the next call on a bare machine skips the compiles (a cold cache works too, slower: a
#   fresh FlashInfer server spent 172 s compiling inside its launch).
#
# - SPECBENCH_COMMAND (default sweep): `tune` runs `specbench tune` instead, with the same
#   options (EAGLE-3 at K = 1, 2, 3, 5, zero-step, SGLang's default adaptive and the tuned
#   server; --modes picks among them).
#
# PyTorch sampling: the bundle's FlashInfer sampling kernels are not built. Levels 1..128 fit
# the KV pool of an 8B model with EAGLE-3 on one H200.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 RUN_DIR TARGET_DIR DRAFT_DIR [specbench sweep options]" >&2
  exit 2
fi
run_dir=$1 target=$2 draft=$3
shift 3
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
python3 -c "import sglang" 2>/dev/null || {
  echo "h200_sweep: SGLang is not importable by python3; install it (0.5.14..0.5.23) first" >&2
  exit 2
}

mkdir -p "$run_dir/models"
for d in "$target" "$draft"; do
  if [ -f "$d/construction.json" ]; then cp "$d/construction.json" "$run_dir/models/"; fi
done
if [ -n "${MODELS_NOTE:-}" ]; then printf '%s\n' "$MODELS_NOTE" > "$run_dir/models/README.md"; fi

backend=${ATTENTION_BACKEND:-flashinfer}
command=${SPECBENCH_COMMAND:-sweep}
case $command in
  sweep|tune) ;;
  *) echo "h200_sweep: SPECBENCH_COMMAND=$command: use sweep or tune" >&2; exit 2 ;;
esac
cache_dirs=("$HOME/.cache/flashinfer" "$HOME/.cache/tvm-ffi" "$HOME/.triton" "/tmp/torchinductor_$(id -un)")
if [ -n "${KERNEL_CACHE:-}" ] && [ -f "$KERNEL_CACHE" ]; then
  tar xJf "$KERNEL_CACHE" -C / && echo "h200_sweep: kernel caches restored from $KERNEL_CACHE"
fi
save_cache() {
  if [ -n "${KERNEL_CACHE:-}" ]; then
    local present=()
    for d in "${cache_dirs[@]}"; do if [ -d "$d" ]; then present+=("${d#/}"); fi; done
    if [ ${#present[@]} -gt 0 ]; then
      tar cf - -C / "${present[@]}" | xz -T0 -6 > "$KERNEL_CACHE.tmp" && mv "$KERNEL_CACHE.tmp" "$KERNEL_CACHE"
      echo "h200_sweep: kernel caches saved to $KERNEL_CACHE ($(du -h "$KERNEL_CACHE" | cut -f1))"
    fi
  fi
}

if [ -f "$run_dir/manifest.json" ]; then
  where=(--resume "$run_dir")
else
  where=(--results-dir "$(dirname "$run_dir")" --run-name "$(basename "$run_dir")")
fi
limit=()
if [ -n "${STOP_AFTER_S:-}" ]; then limit=(timeout --signal=INT --kill-after=60 "$STOP_AFTER_S"); fi

set +e
"${limit[@]}" python3 -m specbench "$command" --engine sglang "${where[@]}" \
  --model-path "$target" --draft-model-path "$draft" \
  --server-arg "--attention-backend $backend" --server-arg "--sampling-backend pytorch" \
  --prompts coding,agentic --concurrency 1,4,16,32,64,128 --warmup-s 3 --window-s 8 \
  "$@"
code=$?
set -e
save_cache
echo "h200_sweep: specbench $command exited $code"
exit "$code"
