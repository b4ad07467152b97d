#!/usr/bin/env bash
# One call on a device machine that starts bare and goes back 30 s after a call: set up (or find
# set up), run the FlashInfer sweeps in the background, wait, and leave what was measured in $OUT.
#
# Usage, as the device command (the checkout's tree is there; BUNDLE and KIT carried in, e.g. an
# ignored .gpu/ folder holding the bundle from the kit's build-bundle.sh, the kit's
# build_constructed_models.py and tokenizer/, and runs.tar.xz / kernel-cache.tar.xz brought
# back by an earlier call):
#   WAIT_S=540 bash lab/gpu/device_call.sh .gpu
# A call carries 64 MiB: the bundle (55 MB), the kit (2 MB, 0.3 MB with tokenizer.json xz'd), the
# tracked files without results/ (4.8 MB) and a runs.tar.xz (2-8 MB) just fit; results/ (54 MB)
# must be out of the checkout while a call that carries the bundle is sent (move it aside and
# back). With the kernel cache too (4.5 MB at xz -9e), also move tests/, tools/ and docs/ aside
# (on 2026-12-06 the restored cache did not shorten the first launch: 210 s, as without it). Issue the next call at
# once when one returns: 30 s later the machine and everything on it are gone (stop 36 lost its
# third call's machine that way), and this script then starts over from the carried runs.tar.xz.
#
# A partial run committed under results/gpu/ resumes when it is carried as the runs archive:
#   tar cJf KIT/runs.tar.xz -C results/gpu --transform 's,^,runs/,' RUN_NAME
# - On a bare machine (no /tmp/sb/started): unpack SGLang (the kit's run-sglang.sh), build the
#   constructed 8B pair, restore runs.tar.xz and kernel-cache.tar.xz if carried, and start
#   PLAN (default: this script's `plan` below) under setsid, so it outlives the call.
# - On a machine a previous call set up (still warm: the next call came within 30 s), it only
#   waits: the sweeps go on where they are, servers up, caches warm.
# - Either way it returns WAIT_S seconds after it started (the bare machine's setup, 60-90 s,
#   included: a call is cut at 600 s, so 540 leaves the archives time), or once the plan has
#   ended, and writes $OUT/runs.tar.xz (every run directory, resumable),
#   $OUT/session.log and $OUT/kernel-cache.tar.xz (carry it into the next bare machine's
#   call). A run cut short by a lost
#   machine resumes from the last runs.tar.xz: h200_sweep.sh resumes a run directory it finds.
set -u
KIT=$(cd "${1:?usage: device_call.sh KIT_DIR}" && pwd)
REPO=$(pwd)
S=/tmp/sb
log=/tmp/session.log

profiled() {  # RUN_DIR MODES LEVELS [sweep options]: a kernel profile per server and level
  local run=$1 modes=$2 levels=$3  # the prompt set: PROMPTS (default coding)
  shift 3
  bash lab/gpu/h200_sweep.sh "$run" /tmp/models/target /tmp/models/draft --plan dense \
    --warmup-s 2 --window-s 12 --modes "$modes" --prompts "${PROMPTS:-coding}" \
    --concurrency "$levels" "$@" &
  local sweep=$! prof=/tmp/prof-$(basename "$run")
  python3 lab/gpu/profile_steps.py watch --port 30000 --levels "$levels" \
    --modes "$modes" --out "$prof" --until-pid $sweep --min-frac "${MIN_FRAC:-0.9}"
  wait $sweep
  python3 lab/gpu/profile_steps.py summarize "$prof" | tee "$run/profile-steps.txt"
  cp "$prof/steps.json" "$run/profile-steps.json"
}

plan() {  # the runs, in priority order; each resumes what an earlier call left
  # The card names the runs (an H100 may come where an H200 was asked for; its runs are its own).
  local gpu card
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  card=$(grep -o 'H[0-9]\{3\}' <<< "$gpu" | tr 'H' 'h')
  local shape=llama8b-shape-q0.3
  [[ ${MODELS:-} == random ]] && shape=llama1b-random
  local R=/tmp/runs N=${card:-h200}-sglang-0.5.17-$shape-${ATTENTION_BACKEND:-flashinfer}
  echo "[device_call] card: $gpu"
  local M=(/tmp/models/target /tmp/models/draft)
  local common=(--plan dense --warmup-s 2 --window-s 6 --skip-zero-step-draft-extend)
  # Done: main, relaunch, q0.5, arrivals, agentic2, deflen, straddle (H200; the agentic run's
  # last point, the dynamic server at 32, left); fisteps, fiprof, nograph, tune (84 of 84
  # points; the tuned agentic server again with one drafting K, its old points dropped by
  # lab/gpu/drop_points.py), zprof, launchk, zprofa, ends, straddle (H100), tuned (H100).
  # Left: zsteps (H100), straddle2 (the coding crossing inside the grid, either card). The
  # steps run in the order written here, whatever the order in STEPS.
  local default_steps="straddle ends"
  [[ $card == h200 ]] && default_steps="straddle ends"
  local steps=" ${STEPS:-$default_steps} "
  # 0. The tuned schedule (issue 40): EAGLE-3 at K = 1, 2, 3, 5, zero-step, SGLang's default
  #    adaptive server and the tuned one, both sets x 6 levels: 84 points, 47.6 GPU-min by
  #    `--dry-run`, so it resumes across calls and sessions. The baseline is the main run's.
  [[ $steps == *" tune "* ]] && SPECBENCH_COMMAND=tune bash lab/gpu/h200_sweep.sh \
    "$R/$N-tune" "${M[@]}" "${common[@]}" \
    --modes eagle3,eagle3-k1,eagle3-k2,eagle3-k5,zero-step,sglang-default,tuned
  # 1. The main run: 4 configurations x 2 sets x 6 levels (resumed where a lost machine left it).
  [[ $steps == *" main "* ]] && bash lab/gpu/h200_sweep.sh "$R/$N" "${M[@]}" "${common[@]}" \
    --modes baseline,eagle3,zero-step,dynamic
  # 2. A second launch of each speculative configuration around c* and T.
  [[ $steps == *" relaunch "* ]] && bash lab/gpu/h200_sweep.sh "$R/$N-relaunch" "${M[@]}" "${common[@]}" \
    --modes eagle3,zero-step --concurrency 16,32,64,128
  # 3. A second acceptance (issue 37): the same target, a draft with per-token acceptance 0.5.
  if [[ $steps == *" q0.5 "* ]]; then
    (cd "$KIT" && H=4096 L=32 NH=32 NKV=8 I=14336 Q=0.5 \
      python3 build_constructed_models.py /tmp/models-q0.5 tokenizer) > /tmp/build-q0.5.log 2>&1
    tail -1 /tmp/build-q0.5.log
    sha256sum /tmp/models/target/model.safetensors /tmp/models-q0.5/target/model.safetensors
    MODELS_NOTE="${MODELS_NOTE/acceptance 0.7/acceptance 0.5}" \
      bash lab/gpu/h200_sweep.sh "$R/${N/q0.3/q0.5}" /tmp/models-q0.5/target \
      /tmp/models-q0.5/draft --plan dense --warmup-s 2 --window-s 8 --modes eagle3 \
      --prompts coding --concurrency 1,16,64,128
  fi
  # 4. Open-loop arrivals (issue 38), coding, around the closed-loop c* (about 3.7 requests/s).
  [[ $steps == *" arrivals "* ]] && bash lab/gpu/h200_sweep.sh "$R/$N-arrivals" "${M[@]}" "${common[@]}" \
    --modes baseline,eagle3,dynamic --prompts coding --request-rates 2,3,4,6 \
    --slo ttft_ms=2000,tpot_ms=40
  # 5. The agentic E gap at 64/128 (issue 36): zero-step and the dynamic server launched again,
  #    the dynamic one at the main run's agentic T = 22, 12-s windows: 11 points, 12.8 GPU-min.
  [[ $steps == *" agentic2 "* ]] && bash lab/gpu/h200_sweep.sh "$R/$N-agentic2" "${M[@]}" \
    --plan dense --warmup-s 2 --window-s 12 --skip-zero-step-draft-extend \
    --modes zero-step,dynamic --threshold 22 --prompts agentic --concurrency 16,32,64,128
  # 6. The default's output lengths (issue 37): the coding set with each row's cap drawn from the
  #    default profile's length law (330 tokens on average against the rows' 939; the
  #    constructed models never stop early), baseline and EAGLE-3 around the default's c*.
  if [[ $steps == *" deflen "* ]]; then
    python3 lab/gpu/default_lengths.py coding llama-3.1-8b-1xh200 > /tmp/coding-deflen.jsonl
    bash lab/gpu/h200_sweep.sh "$R/$N-deflen" "${M[@]}" --plan dense --warmup-s 2 \
      --window-s 8 --modes baseline,eagle3 --prompts /tmp/coding-deflen.jsonl \
      --concurrency 8,16,24,32,48,64
  fi
  # 7. One step at a time (issue 37): the prefill forwards' cost at load, which 40-step intervals
  #    over-read (fit_profile.py --steps-run); coding with the rows' own caps, so the deflen run
  #    stays held out.
  [[ $steps == *" fisteps "* ]] && bash lab/gpu/h200_sweep.sh "$R/$N-coding-steps" "${M[@]}" \
    --plan dense --warmup-s 2 --window-s 8 --modes baseline,eagle3 --prompts coding \
    --concurrency 4,16,32,64 --server-arg "--decode-log-interval 1"
  # 7b. EAGLE-3's verify without CUDA graphs (issue 37): under graphs FlashInfer's verify tiles
  #     128 query rows for the 16 a request fills (lab/notes/benchmarks.md); without them the tile
  #     fits the rows. If the concave growth of EAGLE-3's step from 16 to 64 running is the
  #     tile, these steps fall below the fisteps run's (same card, same requests).
  [[ $steps == *" nograph "* ]] && bash lab/gpu/h200_sweep.sh "$R/$N-coding-steps-nograph" \
    "${M[@]}" --plan dense --warmup-s 2 --window-s 8 --modes eagle3 --prompts coding \
    --concurrency 16,32,64 --server-arg "--decode-log-interval 1" --server-arg "--disable-cuda-graph"
  # 7c. Kernel time per step (issue 37): a torch profile of 20 steps of each server at each
  #     level, taken by profile_steps.py while the sweep holds the level; its table splits a step
  #     into the verify's attention, the decode's, GEMMs, other kernels and idle (the host).
  [[ $steps == *" fiprof "* ]] && profiled "$R/$N-coding-prof" baseline,eagle3 16,32,64,128
  # 7d. The same for zero-step (issue 37): its one-token verify's step rises over the plain
  #     server's from 16 to 32 running (+2.7 / +4.4 ms on the H100), which the model does not
  #     charge; the kernels say whether that is the verify's attention or the host.
  [[ $steps == *" zprof "* ]] && profiled "$R/$N-coding-prof-zero-step" zero-step \
    16,32,64,128 --skip-zero-step-draft-extend
  # 7e. Zero-step and the plain server at agentic contexts (issue 37): zero-step's one-token
  #     verify read 1.21-1.34 plain decodes' KV at coding contexts (zprof); the held-out agentic
  #     zero-step points are 16-17% off at 32 and 128. The same profile with agentic's 3-4k.
  [[ $steps == *" zprofa "* ]] && PROMPTS=agentic MIN_FRAC=0.8 profiled "$R/$N-agentic-prof" \
    baseline,zero-step 32,64,128 --skip-zero-step-draft-extend
  # 7f. The same two at agentic contexts one step a log line (issue 37): a profile's 20 steps
  #     there mix in long prefills (zprofa), the decode lines of one step each do not.
  [[ $steps == *" zsteps "* ]] && bash lab/gpu/h200_sweep.sh "$R/$N-agentic-steps" \
    "${M[@]}" --plan dense --warmup-s 2 --window-s 8 --modes baseline,zero-step \
    --skip-zero-step-draft-extend --prompts agentic --concurrency 16,32,64,128 \
    --server-arg "--decode-log-interval 1"
  # 8. An adaptive server below its launch K (issue 40): the tuned agentic server, launched at
  #    K = 5, ran K = 3 with 12-26% longer steps than the static K = 3 server. One launch at 5
  #    running K = 3 from batch size 1 (slot 0 holds the 5), against static K = 3: a log line
  #    every step, a kernel profile at each level.
  [[ $steps == *" launchk "* ]] && profiled "$R/$N-launch-k" eagle3,tuned 1,16,64 \
    --schedule 0:5,1:3 --server-arg "--decode-log-interval 1"
  # 9. Outputs that end together: the coding set with every cap the mean of the default
  #     profile's drawn lengths (equal) against the drawn caps themselves (staggered), the same
  #     mean; the constructed models never stop early, so the caps are the lengths.
  #     ENDS_MODES and ENDS_WINDOW_S narrow it to what a short device budget holds (one launch);
  #     ENDS_PROFILE= (empty) drops the kernel profile; ENDS_LEVELS (default 16,64) the levels.
  #     The same run is explain's: a log line every step and a kernel profile at 64 (the
  #     profile's 20 steps fall at each window's end, the same in both sets), and the tree
  #     draft (topk 4, 8 draft tokens) beside the chain, last, so a tree that fails to launch
  #     loses nothing measured before it.
  if [[ $steps == *" ends "* ]]; then
    python3 lab/gpu/default_lengths.py coding llama-3.1-8b-1xh200 > /tmp/coding-staggered.jsonl
    python3 lab/gpu/default_lengths.py coding llama-3.1-8b-1xh200 --equal > /tmp/coding-equal.jsonl
    bash lab/gpu/h200_sweep.sh "$R/$N-ends" "${M[@]}" --plan dense --warmup-s 2 \
      --window-s "${ENDS_WINDOW_S:-12}" --modes "${ENDS_MODES:-baseline,eagle3,eagle3-k3-t4-d8}" \
      --prompts /tmp/coding-equal.jsonl,/tmp/coding-staggered.jsonl \
      --concurrency "${ENDS_LEVELS:-16,64}" --server-arg "--decode-log-interval 1" \
      ${ENDS_PROFILE---profile-steps 64}
  fi
  # 9b. The coding crossing inside the grid, one launch each: the H200 straddle run at 64,128
  #     read zero-step as fast as EAGLE-3 already at 64 (the main run: c* 82), so 32,64,128
  #     there; on an H100 EAGLE-3 led zero-step up to 128 (the tune run), so 128,250.
  if [[ $steps == *" straddle2 "* ]]; then
    local coding_run=$N-straddle-coding2 coding_levels=32,64,128
    [[ $card != h200 ]] && coding_run=$N-straddle-coding coding_levels=128,250
    # EAGLE-3 with 250 running requests outgrew FlashInfer's 384-MiB workspace in its graph
    # capture on an H100 (asked for 562 MiB): 1 GiB.
    SGLANG_FLASHINFER_WORKSPACE_SIZE=1073741824 bash lab/gpu/h200_sweep.sh "$R/$coding_run" "${M[@]}" --plan dense --warmup-s 2 \
      --window-s 12 --skip-zero-step-draft-extend --modes eagle3,zero-step,dynamic \
      --prompts coding --concurrency "$coding_levels" --straddle-rounds 1 \
      --server-arg "--decode-log-interval 1"
  fi
  # 9c. The tuned agentic server (the H100 tune run's schedule: K = 3 from batch size 1) beside
  #     both static servers at 16 and 64, one launch each, 12-s windows: its E paired by request.
  [[ $steps == *" tuned "* ]] && bash lab/gpu/h200_sweep.sh "$R/$N-tuned-agentic" "${M[@]}" \
    --plan dense --warmup-s 2 --window-s 12 --skip-zero-step-draft-extend \
    --modes eagle3,zero-step,tuned --schedule 1:3 --prompts agentic --concurrency 16,64
  # 10. The dynamic server where it decides: EAGLE-3 and zero-step at the grid, T chosen from
  #    them, then both static servers at T-1, T, T+1 beside the dynamic one (one step a log
  #    line, for the switches and step times around T). Where the crossing lies on an H100:
  #    agentic between 64 and 128 (the tune run: c* 118), coding above 128; on an H200 coding
  #    between 64 and 128 (c* 82), agentic between 16 and 32 (c* 22).
  # STRADDLE_CARD (h100 or h200) runs this step only on that card: a resumed run is the card's.
  if [[ $steps == *" straddle "* && ( -z ${STRADDLE_CARD:-} || $card == "${STRADDLE_CARD:-}" ) ]]
  then
    # STRADDLE_SETS picks the sets (default: those whose crossing lies inside the grid).
    local set levels default_sets=agentic
    [[ $card == h200 ]] && default_sets="coding agentic"
    for set in ${STRADDLE_SETS:-$default_sets}; do
      levels=64,128
      [[ $card == h200 && $set == agentic ]] && levels=16,32
      # On an H100 the agentic run at 64,128 read zero-step as fast as EAGLE-3 at both.
      [[ $card != h200 && $set == agentic ]] && levels=32,64
      bash lab/gpu/h200_sweep.sh "$R/$N-straddle-$set" "${M[@]}" --plan dense \
        --warmup-s 2 --window-s 12 --skip-zero-step-draft-extend \
        --modes eagle3,zero-step,dynamic --prompts "$set" --concurrency "$levels" \
        --straddle-rounds "${STRADDLE_ROUNDS:-1}" --server-arg "--decode-log-interval 1"
    done
  fi
  return 0
}

if [ ! -f "$S/started" ]; then
  rm -rf "$S" && mkdir -p "$S" && cp -r "$REPO"/. "$S"/ && cd "$S" || exit 1
  {
    echo "[device_call] bare machine: setting up"
    # shellcheck disable=SC1091
    source "$KIT/run-sglang.sh" "$KIT/bundle" || exit 1
    # The tokenizer may come xz-compressed (2.2 MB -> 0.3 MB) to leave room for the kernel cache.
    if [ -f "$KIT/tokenizer/tokenizer.json.xz" ]; then xz -dkf "$KIT/tokenizer/tokenizer.json.xz"; fi
    # MODELS=random: the kit's small random pair (hidden 2048, 16 layers; its draft accepts
    # nothing), built and launched in seconds, for a plain-server step on a short device budget.
    builder=build_constructed_models.py shape="H=4096 L=32 NH=32 NKV=8 I=14336"
    if [[ ${MODELS:-} == random ]]; then builder=build_random_models.py shape="H=2048 L=16"; fi
    (cd "$KIT" && env $shape Q="${Q:-0.3}" python3 "$builder" /tmp/models tokenizer) \
      > /tmp/build.log 2>&1 || { echo "model build failed"; tail -20 /tmp/build.log; exit 1; }
    if [ -f "$KIT/runs.tar.xz" ]; then tar xJf "$KIT/runs.tar.xz" -C /tmp; fi
    if [ -f "$KIT/kernel-cache.tar.xz" ]; then tar xJf "$KIT/kernel-cache.tar.xz" -C /; fi
    export PYTHONPATH="$S:$PYTHONPATH" MPLBACKEND=Agg PYTHONUNBUFFERED=1
    note="Constructed Llama-3.1-8B-shaped target + EAGLE-3 draft, per-token draft acceptance $(python3 -c "print(1-${Q:-0.3})"), built by the device kit's build_constructed_models.py; ${ATTENTION_BACKEND:-flashinfer} attention, PyTorch sampling."
    [[ ${MODELS:-} == random ]] && note="Random-weight Llama target (hidden 2048, 16 layers) and EAGLE-3 draft, built by the device kit's build_random_models.py; ${ATTENTION_BACKEND:-flashinfer} attention, PyTorch sampling."
    export KIT STEPS ENDS_MODES ENDS_WINDOW_S ENDS_PROFILE ENDS_LEVELS STRADDLE_ROUNDS STRADDLE_SETS
    export STRADDLE_CARD MODELS MODELS_NOTE="$note"
    touch "$S/started"
    echo "[device_call] setup done; the runs start"
    setsid nohup bash -c "$(declare -f profiled plan); cd $S; plan; echo '[device_call] all runs done'" \
      < /dev/null >> "$log" 2>&1 &
  } >> "$log" 2>&1
else
  echo "[device_call] warm machine: the runs go on" >> "$log"
fi
# Until WAIT_S after the start (setup included: SECONDS counts from it), or less once the plan
# has ended (a warm call would otherwise hold an idle GPU).
end_s=${WAIT_S:-540}
while (( SECONDS < end_s )) && ! grep -q '^\[device_call\] all runs done' "$log"; do sleep 5; done
cd /tmp || exit 1
if [ -d runs ]; then tar cf - runs | nice -n 19 xz -T2 -3 > "$OUT/runs.tar.xz"; fi
cp "$log" "$OUT/session.log"
# The kernel caches come back with every call (~4 MB): two sessions lost their machine between
# calls before a final one, and a bare machine without them spends 170-190 s compiling.
dirs=(); for d in root/.cache/flashinfer root/.cache/tvm-ffi root/.triton; do
  if [ -d "/$d" ]; then dirs+=("$d"); fi; done
if [ ${#dirs[@]} -gt 0 ]; then tar cf - -C / "${dirs[@]}" | xz -T0 -3 > "$OUT/kernel-cache.tar.xz"; fi
tail -30 "$log"
