"""The simulator refuses exactly what SGLang 0.5.23's own code refuses, with its words.

One probe process (tests/sim/sglang_probe.py) runs SGLang's code on generated cases:
`SamplingParams.normalize/verify`, the chat and completions request models with their
mapping to sampling parameters and chat's `_validate_request` (tools, tool_choice, the
max_completion_tokens check), the `/generate` JSON contract, the TokenizerManager's
context-length check with the EAGLE family's reserved slots, and the auth decision. The
simulator answers the same cases in process (validation.py, sampling.py, openai_api.py,
auth.py) and every verdict must match: refused with the same message, or accepted. Where
SGLang's refusal comes from pydantic's type checks the simulator must refuse too (its words
there are its own). Skipped without sglang.
"""

from __future__ import annotations

import itertools
import random
from types import SimpleNamespace
from typing import Any

import pytest

from specbench.sim import auth, openai_api
from specbench.sim.args import build_parser, resolve
from specbench.sim.costmodel import load_profile
from specbench.sim.generation import BadRequest
from specbench.sim.validation import check_sampling, fit_context, generate_params_error
from tests.sim.conftest import EAGLE3_FLAGS, MODEL
from tests.sim.sglang_probe import require_sglang, run_probe

pytestmark = pytest.mark.contract

VOCAB = 128256
PROBE = r"""
from types import SimpleNamespace as NS
from pydantic import ValidationError
from sglang.srt.sampling.sampling_params import SamplingParams
from sglang.srt.entrypoints.api_contract import generate_contract_error
from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest, CompletionRequest
import sglang.srt.entrypoints.openai.serving_chat as chat_mod
from sglang.srt.entrypoints.openai.serving_chat import OpenAIServingChat
from sglang.srt.entrypoints.openai.serving_completions import OpenAIServingCompletion
import sglang.srt.managers.tokenizer_manager as tm_mod
import sglang.srt.managers.utils as mgr_utils
import sglang.srt.runtime_context as rc
from sglang.srt.utils.auth import AuthLevel, decide_request_auth

class Tok:
    def encode(self, text, add_special_tokens=False):
        return list(text.encode())

def verify(kwargs):
    try:
        sp = SamplingParams(**kwargs)
        sp.normalize(Tok())
        sp.verify(JOB["vocab"])
    except ValueError as exc:
        return str(exc)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None

chat_mod.get_model = lambda: NS(context_length=JOB["context_length"])
chat_mod.get_serving = lambda: NS(trust_request_chat_template=False, allow_auto_truncate=False)
stub = NS(is_minimax_m3=False, _validate_media_content=lambda r: None)
stub._effective_tools = lambda r: OpenAIServingChat._effective_tools(stub, r)

def chat(body):
    try:
        req = ChatCompletionRequest(**body)
    except ValidationError:
        return {"pydantic": True}
    message = OpenAIServingChat._validate_request(stub, req)
    if message:
        return {"message": message}
    params = req.to_sampling_params(stop=req.stop or [], model_generation_config={})
    return {"message": verify(params)}

def completion(body):
    try:
        req = CompletionRequest(**body)
    except ValidationError:
        return {"pydantic": True}
    message = OpenAIServingCompletion._validate_request(None, req)
    if message:
        return {"message": message}
    return {"message": verify(OpenAIServingCompletion._build_sampling_params(None, req))}

def generate(body):
    message = generate_contract_error(body)
    if message:
        return {"contract": message}
    params = dict(body.get("sampling_params") or {})
    return {"message": verify(params)}

tm_mod.get_exec = lambda: NS(features=NS(enable_encoder_swa_bounded_replay=False))

def context(case):
    self = NS(context_len=case["ctx"], allow_auto_truncate=case["auto"],
              num_reserved_tokens=case["reserved"], validate_total_tokens=True,
              _validate_joint_schema_request=lambda obj, ids: None)
    params = {} if case["max_new"] is None else {"max_new_tokens": case["max_new"]}
    obj = NS(sampling_params=params, image_data=None)
    ids = [0] * case["prompt"]
    try:
        tm_mod.TokenizerManager._validate_one_request(self, obj, ids)
    except ValueError as exc:
        return {"message": str(exc)}
    return {"prompt": len(ids), "max_new": obj.sampling_params.get("max_new_tokens")}

def reserved(case):
    spec = NS(speculative_algorithm=case["algorithm"], speculative_eagle_topk=case["topk"],
              speculative_num_steps=case["steps"], speculative_num_draft_tokens=case["draft"],
              max_speculative_num_draft_tokens=None)
    mgr_utils.get_spec = rc.get_spec = lambda: spec
    return mgr_utils.compute_num_reserved_tokens()

def allowed(case):
    level = AuthLevel.ADMIN_OPTIONAL if case["path"] == "/flush_cache" else AuthLevel.NORMAL
    return decide_request_auth(method=case["method"], path=case["path"],
                               authorization_header=case["header"], api_key=case["api_key"],
                               admin_api_key=case["admin_api_key"], auth_level=level).allowed

print(json.dumps({
    "sampling": [verify(k) for k in JOB["sampling"]],
    "chat": [chat(b) for b in JOB["chat"]],
    "completions": [completion(b) for b in JOB["completions"]],
    "generate": [generate(b) for b in JOB["generate"]],
    "context": [context(c) for c in JOB["context"]],
    "reserved": [reserved(c) for c in JOB["reserved"]],
    "auth": [allowed(c) for c in JOB["auth"]],
}))
"""

# Values around each range's edges, plus some of the wrong kind.
EDGES: dict[str, list[Any]] = {
    "temperature": [-1, -0.5, 0, 0.0, 1e-7, 0.7, 1, 2.0, 100],
    "top_p": [-0.1, 0, 0.0, 1e-9, 0.5, 1, 1.0, 1.01],
    "top_k": [-2, -1, 0, 1, 40, 1 << 30, (1 << 30) + 1],
    "min_p": [-0.01, 0, 0.3, 1, 1.5],
    "frequency_penalty": [-2.5, -2, 0, 2, 2.01],
    "presence_penalty": [-3, -2.0, 1.5, 2, 2.5],
    "repetition_penalty": [-1, 0, 0.5, 1, 2, 2.1],
    "min_new_tokens": [-1, 0, 5, 500],
    "max_new_tokens": [-1, 0, 1, 64, None],
    "logit_bias": [{"5": -1.0}, {"-1": 1.0}, {str(VOCAB): 1.0}, {"abc": 1.0}, {}],
    "sampling_seed": [7, -(2**63), 2**63, None],
    "stop": [["zz"], ["s"] * 33, "x", None],
    "stop_regex": [["q+"], ["a" * 300], ["r"] * 33],
    "beam_width": [0, 1, 4],
    "json_schema": ['{"type": "object"}', None],
    "regex": ["a+", None],
}


def sampling_cases(rng: random.Random) -> list[dict[str, Any]]:
    cases = [{name: value} for name, values in EDGES.items() for value in values]
    for _ in range(250):
        keys = rng.sample(sorted(EDGES), rng.randint(2, 5))
        cases.append({k: rng.choice(EDGES[k]) for k in keys})
    return cases


CHAT_FIELDS: dict[str, list[Any]] = {
    "temperature": [-1, 0, 0.5, 3, "hot", "0.5", True, None],
    "top_p": [0, 0.9, 1.5, None],
    "top_k": [-1, 0, 20, 2.5, "7", None],
    "min_p": [0.05, 2, None],
    "frequency_penalty": [0.1, -3, None],
    "presence_penalty": [0.2, 2.5, None],
    "repetition_penalty": [1.05, 0, None],
    "seed": [7, 2**64, 1.5, None],
    "max_tokens": [64, -5, 0, 1.0, None],
    "max_completion_tokens": [32, 5000, None],
    "min_tokens": [1, -1, 100, None],
    "n": [1, None],
    "logit_bias": [{"5": -1.0}, {"999999": 1.0}],
    "stop": [["zzz"], None],
    "ignore_eos": [False, True, None, "yes", 1],
}
TOOL = {
    "type": "function",
    "function": {
        "name": "run_tests",
        "description": "Run the test suite.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}
TOOL_VARIANTS: list[Any] = [
    None,
    [TOOL],
    [{**TOOL, "function": {**TOOL["function"], "parameters": {"type": "varchar(255)"}}}],
    [{**TOOL, "function": {**TOOL["function"], "parameters": {"type": "int64"}}}],
    [{**TOOL, "function": {**TOOL["function"], "parameters": {"type": "nonsense"}}}],
    [{**TOOL, "function": {**TOOL["function"], "parameters": {"properties": {"a": 3}}}}],
    [{**TOOL, "function": {"name": "f", "parameters": {"type": "object", "required": "a"}}}],
    [{**TOOL, "function": {"name": "g"}}],
]
TOOL_CHOICES: list[Any] = [
    None,
    "auto",
    "none",
    "required",
    "always",
    {"type": "function"},
    {"type": "function", "function": {"name": "run_tests"}},
    {"type": "function", "function": {"name": "no_such_tool"}},
]


def chat_cases(rng: random.Random) -> list[dict[str, Any]]:
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    cases = [{**base, k: v} for k, values in CHAT_FIELDS.items() for v in values]
    for tools, choice in itertools.product(TOOL_VARIANTS, TOOL_CHOICES):
        case: dict[str, Any] = {**base, "max_tokens": 16}
        if tools is not None:
            case["tools"] = tools
        if choice is not None:
            case["tool_choice"] = choice
        cases.append(case)
    for _ in range(120):
        keys = rng.sample(sorted(CHAT_FIELDS), rng.randint(2, 4))
        cases.append({**base, **{k: rng.choice(CHAT_FIELDS[k]) for k in keys}})
    return cases


def completion_cases(rng: random.Random) -> list[dict[str, Any]]:
    fields = {**CHAT_FIELDS, "max_tokens": [16, 0, -1, 3.0, None]}
    fields.pop("max_completion_tokens")
    base = {"model": "m", "prompt": "def f():"}
    cases = [{**base, k: v} for k, values in fields.items() for v in values]
    cases += [{"model": "m", "prompt": ""}, {"model": "m", "prompt": ["", ""]}]
    for _ in range(80):
        keys = rng.sample(sorted(fields), rng.randint(2, 4))
        cases.append({**base, **{k: rng.choice(fields[k]) for k in keys}})
    return cases


GENERATE_VALUES: dict[str, list[Any]] = {
    "max_new_tokens": [8, -1, "8", 8.0, None],
    "temperature": [0, 0.5, -1, "x", True],
    "top_p": [0.9, 0, [1]],
    "top_k": [1, 0, 1.5],
    "frequency_penalty": [0.1, 5],
    "presence_penalty": [0.1, -5],
    "repetition_penalty": [1.1, 0, 3],
    "stop": ["x", ["x", "y"], [1], 3],
    "stop_token_ids": [[1, 2], [1.5], "1"],
    "stop_regex": ["a+", ["a+"]],
    "ignore_eos": [True, "yes"],
    "no_stop_trim": [False, 0],
    "logit_bias": [{"5": 1.0}, {"5": "a"}, [1]],
    "sampling_seed": [3, 3.5],
    "spaces_between_special_tokens": [True],
    "structural_tag": ["{}"],
    "beam_width": [2, 0],
    "choice": [["a", "b"], "a"],
    "watermark": [{"enabled": True}, {"secret": 1}],
    "max_tokens": [8],
    "seed": [1],
}


def generate_cases(rng: random.Random) -> list[dict[str, Any]]:
    cases = [
        {"text": "hi", "sampling_params": {k: v}}
        for k, values in GENERATE_VALUES.items()
        for v in values
    ]
    for _ in range(150):
        keys = rng.sample(sorted(GENERATE_VALUES), rng.randint(2, 4))
        cases.append(
            {"text": "hi", "sampling_params": {k: rng.choice(GENERATE_VALUES[k]) for k in keys}}
        )
    return cases


def context_cases() -> list[dict[str, Any]]:
    cases = []
    for ctx, reserved, auto in itertools.product((2048, 4096), (0, 4, 8), (False, True)):
        for prompt in (1, ctx - reserved - 1, ctx - reserved, ctx - 1, ctx, ctx + 10):
            for max_new in (None, 0, 1, 100, ctx):
                cases.append(
                    {"ctx": ctx, "reserved": reserved, "auto": auto, "prompt": prompt,
                     "max_new": max_new}
                )  # fmt: skip
    return cases


SPEC_CASES = [
    {"algorithm": "EAGLE3", "steps": 3, "topk": 1, "draft": 4},
    {"algorithm": "EAGLE3", "steps": 5, "topk": 4, "draft": 8},
    {"algorithm": "EAGLE", "steps": 2, "topk": 8, "draft": 10},
    {"algorithm": "EAGLE3", "steps": 0, "topk": 1, "draft": 1},
]


def auth_cases() -> list[dict[str, Any]]:
    headers = [None, "", "Bearer K", "bearer K", "Bearer A", "Bearer  K", "Basic K", "K"]
    paths = ["/health", "/health_generate", "/ready", "/metrics", "/server_info",
             "/flush_cache", "/v1/chat/completions", "/generate", "/model_info",
             "/nowhere"]  # fmt: skip
    keys = [(None, None), ("K", None), (None, "A"), ("K", "A")]
    return [
        {"method": method, "path": path, "header": header, "api_key": k, "admin_api_key": a}
        for method in ("GET", "POST", "OPTIONS")
        for path in paths
        for header in headers
        for k, a in keys
    ]


def settings_for(*flags: str) -> Any:
    profile = load_profile("llama-3.1-8b-1xh200")
    ns = build_parser().parse_args(["--model-path", MODEL, *flags])
    return resolve(ns, profile, env={})


@pytest.fixture(scope="module")
def cases() -> dict[str, list[Any]]:
    rng = random.Random(20261201)
    return {
        "sampling": sampling_cases(rng),
        "chat": chat_cases(rng),
        "completions": completion_cases(rng),
        "generate": generate_cases(rng),
        "context": context_cases(),
        "reserved": SPEC_CASES,
        "auth": auth_cases(),
    }


@pytest.fixture(scope="module")
def sglang(cases: dict[str, list[Any]]) -> dict[str, list[Any]]:
    require_sglang()
    job = {**cases, "vocab": VOCAB, "context_length": 4096}
    answer: dict[str, list[Any]] = run_probe(PROBE, job)
    return answer


def _sim_message(run: Any) -> str | None:
    try:
        run()
    except BadRequest as exc:
        return str(exc)
    return None


def test_sampling_values_are_refused_as_sglang_refuses_them(
    cases: dict[str, list[Any]], sglang: dict[str, list[Any]]
) -> None:
    for params, expected in zip(cases["sampling"], sglang["sampling"], strict=True):
        got = _sim_message(lambda p=params: check_sampling(p, VOCAB))
        assert got == expected, params


def _openai_verdict(prompt_of: Any, body: dict[str, Any]) -> str | None:
    sim = SimpleNamespace(settings=settings_for("--context-length", "4096"))

    def run() -> None:
        check_sampling(prompt_of(body, sim).sampling, VOCAB)

    return _sim_message(run)


def _agree(kind: str, body: dict[str, Any], real: dict[str, Any], got: str | None) -> None:
    if real.get("pydantic"):
        assert got is not None, f"{kind}: SGLang's request model refuses {body}"
    else:
        assert got == real["message"], (kind, body)


def test_chat_requests_are_refused_as_sglang_refuses_them(
    cases: dict[str, list[Any]], sglang: dict[str, list[Any]]
) -> None:
    for body, real in zip(cases["chat"], sglang["chat"], strict=True):
        _agree("chat", body, real, _openai_verdict(openai_api._chat_prompt, body))


def test_completion_requests_are_refused_as_sglang_refuses_them(
    cases: dict[str, list[Any]], sglang: dict[str, list[Any]]
) -> None:
    for body, real in zip(cases["completions"], sglang["completions"], strict=True):
        got = _openai_verdict(openai_api._completion_prompt, body)
        _agree("completions", body, real, got)


def test_generate_sampling_params_follow_sglangs_contract(
    cases: dict[str, list[Any]], sglang: dict[str, list[Any]]
) -> None:
    for body, real in zip(cases["generate"], sglang["generate"], strict=True):
        params = body["sampling_params"]
        contract = generate_params_error(params)
        if "contract" in real:
            assert contract == real["contract"], params
            continue
        assert contract is None, params
        got = _sim_message(lambda p=params: check_sampling(p, VOCAB))
        if got and got.startswith("Unexpected keyword"):
            got = f"TypeError: {got}"  # SGLang raises it as a TypeError (a 500)
        assert got == real["message"], params


def test_the_generate_whitelist_is_sglangs() -> None:
    params = {"frequency_penalty": 0.1, "presence_penalty": 0.1, "repetition_penalty": 1.1,
              "stop_regex": ["x"], "structural_tag": "{}", "spaces_between_special_tokens": True,
              "beam_width": 1, "watermark": {"enabled": False}, "choice": ["a"]}  # fmt: skip
    assert generate_params_error(params) is None


def test_context_length_rules_are_the_tokenizer_managers(
    cases: dict[str, list[Any]], sglang: dict[str, list[Any]]
) -> None:
    for case, real in zip(cases["context"], sglang["context"], strict=True):
        settings = SimpleNamespace(
            context_length=case["ctx"],
            reserved_tokens=case["reserved"],
            allow_auto_truncate=case["auto"],
        )
        try:
            prompt, max_new = fit_context(case["prompt"], case["max_new"], settings)  # type: ignore[arg-type]
        except BadRequest as exc:
            assert real == {"message": str(exc)}, case
            continue
        assert real == {"prompt": prompt, "max_new": max_new}, case


def test_reserved_slots_are_sglangs(
    cases: dict[str, list[Any]], sglang: dict[str, list[Any]]
) -> None:
    for case, real in zip(cases["reserved"], sglang["reserved"], strict=True):
        flags = list(EAGLE3_FLAGS)
        for flag, key in (("--speculative-num-steps", "steps"),
                          ("--speculative-eagle-topk", "topk"),
                          ("--speculative-num-draft-tokens", "draft")):  # fmt: skip
            flags[flags.index(flag) + 1] = str(case[key])
        flags[flags.index("--speculative-algorithm") + 1] = case["algorithm"]
        settings = settings_for(*flags)
        if settings.speculative_num_draft_tokens != case["draft"]:
            continue  # SGLang's own resolution would not produce this config either
        assert settings.reserved_tokens == real, case
    assert settings_for().reserved_tokens == 0


def test_api_keys_open_what_sglang_opens(
    cases: dict[str, list[Any]], sglang: dict[str, list[Any]]
) -> None:
    for case, real in zip(cases["auth"], sglang["auth"], strict=True):
        got = auth.allowed(
            case["method"], case["path"], case["header"], case["api_key"], case["admin_api_key"]
        )
        assert got == real, case
