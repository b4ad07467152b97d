"""The GPU side of the oracle server: a stand-in for SGLang's scheduler process.

Runs under the SGLang interpreter, spawned by SGLang's own ``launch_server`` in place of
``run_scheduler_process``. It talks to the real TokenizerManager and the real detokenizer over
the same ZMQ channels (``SchedulerIpcChannels.create``), builds SGLang's own ``Req`` from each
``TokenizedGenerateReqInput``, and commits tokens the way the scheduler's result processors do
(``batch_result_processor.py``):

- prefill: one token, ``output_ids.append`` then ``update_finish_state()``;
- each decode step (one verify round when speculative): ``spec_verify_ct += 1``, the correct
  drafts counted and put in the histogram, ``output_ids.extend(run)`` then
  ``update_finish_state(len(run))``;

and streams every step with SGLang's ``SchedulerOutputStreamer`` (the code that builds
``BatchTokenIDOutput`` for the detokenizer). Only the tokens are scripted: the script file
(``$SPECBENCH_ORACLE_SCRIPTS``) maps a script name to its steps, a list of word runs, where
``<eos>`` is the model's EOS token; a request runs the script whose name is a word of its
prompt. Finishing (EOS, length cap, stop trimming) is SGLang's own logic.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import zmq

# Seconds between scripted steps. SGLang's streaming loop merges steps that arrive before it
# reads the last one; at 0.08 s a busy 2-core CI machine merged two (3 content chunks, not 4),
# at 0.2 s it still did once in a while, so the fixture sends a merged stream again
# (conftest.recapture_merged).
STEP_S = float(os.environ.get("SPECBENCH_ORACLE_STEP_S", "0.2"))
EOS_WORD = "<eos>"


# What the recording keeps of each request's SamplingParams (sampling/sampling_params.py), after
# SGLang's HTTP layer, its OpenAI adapters and the TokenizerManager have built it.
RECORDED = ("max_new_tokens", "temperature", "top_p", "top_k", "min_p", "frequency_penalty",
            "presence_penalty", "repetition_penalty", "stop_strs", "stop_token_ids",
            "stop_regex_strs", "sampling_seed", "min_new_tokens", "ignore_eos", "no_stop_trim",
            "skip_special_tokens", "logit_bias")


def _load_scripts(tokenizer: Any, eos_id: int) -> dict[str, tuple[int, list[list[int]]]]:
    """Script name -> (the name's token id, the steps as token ids)."""
    with open(os.environ["SPECBENCH_ORACLE_SCRIPTS"]) as fh:
        raw = json.load(fh)
    vocab = tokenizer.get_vocab()
    return {
        name: (vocab["Ġ" + name], [
            [eos_id if word == EOS_WORD else vocab["Ġ" + word] for word in step]
            for step in steps
        ])
        for name, steps in raw.items()
    }


def _record(name: str, sampling_params: Any) -> None:
    """Append what the scheduler received to ``$SPECBENCH_ORACLE_RECEIVED`` (JSON lines)."""
    path = os.environ.get("SPECBENCH_ORACLE_RECEIVED")
    if not path:
        return
    values = {}
    for key in RECORDED:
        value = getattr(sampling_params, key, None)
        values[key] = sorted(value) if isinstance(value, (set, frozenset)) else value
    with open(path, "a") as fh:
        fh.write(json.dumps({"script": name, "sampling": values}, default=str) + "\n")


def run_scheduler_process(server_args, port_args, gpu_id, tp_rank, pp_rank, dp_rank,
                          pipe_writer, *_args: Any, **_kwargs: Any) -> None:
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.managers.io_struct import AbortReq, TokenizedGenerateReqInput, sock_recv
    from sglang.srt.managers.schedule_batch import FINISH_ABORT, Req
    from sglang.srt.managers.scheduler_components.ipc_channels import SchedulerIpcChannels
    from sglang.srt.managers.scheduler_components.output_streamer import (
        SchedulerOutputStreamer,
    )
    from sglang.srt.observability.metrics_collector import SchedulerMetricsCollector
    from sglang.srt.runtime_context import (
        SpawnRanks,
        get_model,
        get_serving,
        get_spec,
        publish,
        spawn_world_rank,
    )
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    from sglang.srt.utils.hf_transformers.tokenizer import get_tokenizer

    publish(server_args, role="scheduler", ranks=SpawnRanks(
        world_rank=spawn_world_rank(server_args, tp_rank=tp_rank, pp_rank=pp_rank),
        dp_rank=dp_rank, gpu_id=gpu_id))
    model_config = ModelConfig.from_server_args(server_args)
    tokenizer = get_tokenizer(get_serving().tokenizer_path,
                              trust_remote_code=get_model().trust_remote_code)
    eos_ids = model_config.hf_eos_token_id
    scripts = _load_scripts(tokenizer, min(eos_ids))
    channels = SchedulerIpcChannels.create(
        port_args=port_args, is_rank_zero=True, skip_tokenizer_init=False,
        metrics_enabled=False, enable_scripted_runtime=False)
    spec_algorithm = SpeculativeAlgorithm.from_string(get_spec().speculative_algorithm)
    # With --enable-metrics (specbench always passes it) requests carry the scheduler's time
    # stamps into meta_info; the collector is what turns them on (Scheduler.init_metrics_collector).
    metrics_collector = SchedulerMetricsCollector.init_new(
        server_args=server_args, enable_priority_scheduling=False, enable_lora=False,
        enable_hierarchical_cache=False).collector
    streamer = SchedulerOutputStreamer(
        send_to_detokenizer=channels.send_to_detokenizer, tree_cache=None,
        server_args=server_args, is_generation=True, spec_algorithm=spec_algorithm,
        disaggregation_mode=DisaggregationMode.NULL, enable_hicache_storage=lambda: False)
    context_len = model_config.context_len
    pipe_writer.send({"status": "ready", "max_total_num_tokens": 1 << 20,
                      "max_req_input_len": context_len - 1, "startup_time": None})

    running: list[tuple[Req, list[list[int]]]] = []
    poller = zmq.Poller()
    poller.register(channels.recv_from_tokenizer, zmq.POLLIN)
    while True:
        # Take every queued request, then run one step of all running ones, as the
        # scheduler's event loop does (recv_requests, then one batch).
        timeout_ms = int(STEP_S * 1000) if running else None
        while poller.poll(timeout_ms):
            timeout_ms = 0
            recv = sock_recv(channels.recv_from_tokenizer, zmq.NOBLOCK)
            if isinstance(recv, TokenizedGenerateReqInput):
                req = Req(recv.rid, recv.input_text, recv.input_ids, recv.sampling_params,
                          stream=recv.stream, eos_token_ids=eos_ids,
                          vocab_size=model_config.vocab_size,
                          http_worker_ipc=recv.http_worker_ipc, time_stats=recv.time_stats,
                          metrics_collector=metrics_collector)
                req.tokenizer = tokenizer
                req.time_stats.set_wait_queue_entry_time()
                # init_req_max_new_tokens: the request's cap within the context
                cap = req.sampling_params.max_new_tokens
                req.sampling_params.max_new_tokens = min(
                    (1 << 30) if cap is None else cap,
                    context_len - len(req.origin_input_ids) - 1)
                name = next((name for name, (token, _) in scripts.items()
                             if token in req.origin_input_ids), None)
                if name is None:
                    req.to_finish = FINISH_ABORT("no oracle script named in the prompt")
                    req.update_finish_state(0)
                    streamer.stream_output([req], False)
                    continue
                _record(name, req.sampling_params)
                running.append((req, [list(step) for step in scripts[name][1]]))
            elif isinstance(recv, AbortReq):  # a client went away
                aborted = [req for req, _ in running if recv.abort_all or req.rid == recv.rid]
                for req in aborted:
                    req.to_finish = FINISH_ABORT()
                    req.update_finish_state(0)
                streamer.stream_output(aborted, False)
                running = [(r, s) for r, s in running if not r.finished()]
            # Anything else (flush_cache, server_info, ...) the tests do not ask for.
        if not running:
            continue
        time.sleep(STEP_S)
        for req, steps in running:
            run = steps.pop(0) if steps else [min(eos_ids)]
            if not req.output_ids:  # prefill: the first token, no verify round
                req.time_stats.set_forward_entry_time()
                req.time_stats.set_prefill_finished_time()
                req.output_ids.append(run[0])
                req.update_finish_state()
                if len(run) > 1:
                    steps.insert(0, run[1:])
                continue
            if not spec_algorithm.is_none():
                req.spec_verify_ct += 1
                req.spec_num_correct_drafts += len(run) - 1
                req.update_spec_correct_drafts_histogram(len(run) - 1)
            req.time_stats.set_last_decode_finish_time()
            req.output_ids.extend(run)
            req.update_finish_state(len(run))
        streamer.stream_output([req for req, _ in running], False)
        running = [(r, s) for r, s in running if not r.finished()]
