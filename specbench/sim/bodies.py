"""The JSON bodies the simulated server reads and writes, typed with SGLang 0.5.23's field names.

Requests follow SGLang's request models (`srt/entrypoints/openai/protocol.py` for the OpenAI
routes, `api/v1/api_types.py` and `srt/managers/io_struct.py` for `/generate`); responses
follow what its serialisers write, which is what the simulator reproduces key for key.

A request body is typed here as SGLang's model declares it, but :func:`generation.json_body`
does not check it: the values are still the client's, and the handlers check the ones they
use (sampling.py, validation.py), as SGLang's pydantic and msgspec models would. Every key of
a request is optional because a client may leave any of them out; the handlers answer a
missing required one as SGLang does.
"""

from __future__ import annotations

from typing import Literal, NotRequired, Required, TypedDict

# ---------------------------------------------------------------------------- sampling


class WatermarkConfig(TypedDict, total=False):
    """`sampling_params.watermark` (api_types.WatermarkRequestConfig)."""

    enabled: bool | None
    key: str | None
    context_window: int | None


class SamplingParams(TypedDict, total=False):
    """SGLang's sampling parameters under its own names: `/generate`'s `sampling_params`
    (api_types.SamplingParams), and what the OpenAI routes map their fields onto."""

    max_new_tokens: int | None
    stop: str | list[str] | None
    stop_token_ids: list[int] | None
    stop_regex: str | list[str] | None
    temperature: float | None
    top_p: float | None
    top_k: int | None
    min_p: float | None
    frequency_penalty: float | None
    presence_penalty: float | None
    repetition_penalty: float | None
    min_new_tokens: int | None
    n: int | None
    json_schema: str | None
    regex: str | None
    ebnf: str | None
    structural_tag: str | None
    ignore_eos: bool | None
    skip_special_tokens: bool | None
    spaces_between_special_tokens: bool | None
    no_stop_trim: bool | None
    stream_interval: int | None
    logit_bias: dict[str, float] | None
    sampling_seed: int | None
    custom_params: object  # user-defined; SGLang hands it to custom logit processors as is
    beam_width: int | None
    watermark: WatermarkConfig | None
    choice: list[str]


# ---------------------------------------------------------------------------- OpenAI requests


class StreamOptions(TypedDict, total=False):
    include_usage: bool | None
    continuous_usage_stats: bool | None


class ContentPart(TypedDict, total=False):
    """One part of a message's content given as a list (the simulator reads only text)."""

    type: str
    text: str


class ChatMessage(TypedDict, total=False):
    """One entry of a chat request's `messages`."""

    role: str
    content: str | list[ContentPart] | None
    name: str | None
    reasoning_content: str | None
    tool_call_id: str | None
    # Rendered into the prompt as JSON; the simulator does not look inside.
    tool_calls: list[dict[str, object]] | None


class FunctionDefinition(TypedDict, total=False):
    name: str
    description: str | None
    parameters: dict[str, object] | None  # a JSON Schema, checked by validation.tools_error
    strict: bool


class Tool(TypedDict, total=False):
    type: str
    function: FunctionDefinition


class ToolChoiceFunction(TypedDict):
    name: str


class ToolChoice(TypedDict, total=False):
    """A named `tool_choice`: `{"type": "function", "function": {"name": ...}}`."""

    type: str
    function: ToolChoiceFunction


class OpenAIRequest(TypedDict, total=False):
    """The fields both OpenAI routes read (the sampling ones as sampling.py maps them)."""

    model: str
    stream: bool
    stream_options: StreamOptions | None
    return_spec_tokens_details: bool
    max_tokens: int | None  # the completions route defaults it to 16; chat to None
    temperature: float | None
    top_p: float | None
    top_k: int
    min_p: float
    min_tokens: int
    n: int
    seed: int | None
    stop: str | list[str] | None
    stop_token_ids: list[int] | None
    stop_regex: str | list[str] | None
    frequency_penalty: float
    presence_penalty: float
    repetition_penalty: float | None
    regex: str | None
    ebnf: str | None
    no_stop_trim: bool
    ignore_eos: bool
    skip_special_tokens: bool
    logit_bias: dict[str, float] | None
    custom_params: dict[str, object] | None  # user-defined, passed on untouched


class ChatRequest(OpenAIRequest, total=False):
    """`POST /v1/chat/completions` (protocol.ChatCompletionRequest)."""

    messages: list[ChatMessage]
    max_completion_tokens: int | None
    tools: list[Tool] | None
    tool_choice: Literal["auto", "required", "none"] | ToolChoice | None


class CompletionRequest(OpenAIRequest, total=False):
    """`POST /v1/completions` (protocol.CompletionRequest)."""

    prompt: str | list[str] | list[int] | list[list[int]]


# ---------------------------------------------------------------------------- OpenAI responses


class PromptTokensDetails(TypedDict):
    cached_tokens: int


class UsageInfo(TypedDict):
    """protocol.UsageInfo as its model dump has it."""

    prompt_tokens: int
    total_tokens: int
    completion_tokens: int
    prompt_tokens_details: PromptTokensDetails | None
    reasoning_tokens: int
    completion_tokens_details: None  # set only with reasoning tokens, which the sim has none of


class SpecTokensDetails(TypedDict):
    """`sglext.spec_tokens_details` (protocol.SpecTokensDetails)."""

    spec_accept_rate: float
    spec_accept_length: float
    spec_cap_length: float
    spec_block_accept_length: float
    spec_num_correct_drafts: int
    spec_num_proposed_drafts: int
    spec_verify_ct: int
    spec_correct_drafts_histogram: list[int]
    spec_cap_lens_histogram: list[int]


class SglExt(TypedDict, total=False):
    """protocol.SglExt: only its set fields are written (the simulator sets one)."""

    spec_tokens_details: SpecTokensDetails


class WeightVersionSpan(TypedDict):
    """One entry of `weight_versions`: the weights that produced output tokens [start, end)."""

    version: str
    start: int
    end: int


class ResponseMetadata(TypedDict):
    weight_version: str
    weight_versions: list[WeightVersionSpan]


class AssistantMessage(TypedDict):
    role: str
    content: str
    reasoning_content: str | None


class ChatChoice(TypedDict):
    index: int
    message: AssistantMessage
    logprobs: None
    finish_reason: str | None
    matched_stop: int | str | None


class CompletionChoice(TypedDict):
    index: int
    text: str
    logprobs: None
    finish_reason: str | None
    matched_stop: int | str | None


class ChatCompletionResponse(TypedDict):
    """A non-streaming chat answer (protocol.ChatCompletionResponse)."""

    id: str
    object: str
    created: int
    model: str
    choices: list[ChatChoice]
    usage: UsageInfo
    metadata: ResponseMetadata
    sglext: NotRequired[SglExt]  # dropped when unset


class CompletionResponse(TypedDict):
    """A non-streaming completions answer (protocol.CompletionResponse)."""

    id: str
    object: str
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: UsageInfo
    metadata: ResponseMetadata
    sglext: NotRequired[SglExt]


# ---------------------------------------------------------------------------- /generate


class GenerateRequest(TypedDict, total=False):
    """`POST /generate` (io_struct.GenerateReqInput; the simulator serves one prompt)."""

    text: str | list[str] | None
    input_ids: list[int] | list[list[int]] | None
    sampling_params: SamplingParams | list[SamplingParams] | None
    stream: bool


class FinishReason(TypedDict, total=False):
    """`meta_info.finish_reason`: which keys come with it depends on `type`."""

    type: Required[Literal["stop", "length", "abort"]]
    matched: int | str | None  # stop
    length: int  # length
    message: str  # abort
    status_code: int  # abort of a refused input
    err_type: str


class CachedTokensDetails(TypedDict):
    device: int
    host: int


class SpecMeta(TypedDict, total=False):
    """The spec_* keys of a finished request's meta_info (each only in some cases)."""

    spec_accept_rate: float
    spec_accept_length: float
    spec_num_correct_drafts: int
    spec_num_proposed_drafts: int
    spec_verify_ct: int
    spec_correct_drafts_histogram: list[int]


class MetaInfo(SpecMeta, total=False):
    """`meta_info` of a `/generate` answer or stream event."""

    id: Required[str]
    finish_reason: Required[FinishReason | None]
    prompt_tokens: Required[int]
    weight_version: Required[str]
    num_retractions: Required[int]
    reasoning_tokens: Required[int]
    completion_tokens: Required[int]
    cached_tokens: Required[int]
    weight_versions: list[WeightVersionSpan]  # final only
    cached_tokens_details: CachedTokensDetails | None
    dp_rank: int | None
    e2e_latency: float  # final only


class GenerateResponse(TypedDict):
    text: str
    output_ids: list[int]
    meta_info: MetaInfo


# ---------------------------------------------------------------------------- /server_info


class GraphPhaseLimits(TypedDict):
    """The keys both phases of `cuda_graph_config` fill the same way (all unset here)."""

    tc_compiler: str
    max_context_size: int | None
    full_prefill_max_req: int | None
    full_prefill_prefix_chunk_tokens: int | None
    max_seq_len: int | None


class GraphPhase(GraphPhaseLimits):
    """One phase of `cuda_graph_config` (server_args.resolved_dict)."""

    backend: str
    max_bs: int | None
    bs: list[int] | None


class CudaGraphConfig(TypedDict):
    decode: GraphPhase
    prefill: GraphPhase


class ResolvedExecution(TypedDict):
    """How SGLang resolved the attention backend, CUDA graphs and overlap scheduling."""

    attention_backend: str
    decode_attention_backend: str | None
    prefill_attention_backend: str | None
    disable_cuda_graph: bool
    disable_overlap_schedule: bool
    cuda_graph_config: CudaGraphConfig


class ServerArgs(ResolvedExecution):
    """The server arguments `/server_info` returns at its top level (the subset simulated)."""

    model_path: str
    tokenizer_path: str
    served_model_name: str
    host: str
    port: int
    tp_size: int
    max_running_requests: int
    chunked_prefill_size: int
    context_length: int | None
    allow_auto_truncate: bool
    max_total_tokens: int | None
    api_key: str | None
    admin_api_key: str | None
    mem_fraction_static: float
    random_seed: int
    enable_metrics: bool
    log_level: str
    skip_server_warmup: bool
    load_format: str
    trust_remote_code: bool
    decode_log_interval: int
    speculative_algorithm: str | None
    speculative_draft_model_path: str | None
    speculative_num_steps: int | None
    speculative_eagle_topk: int | None
    speculative_num_draft_tokens: int | None
    speculative_adaptive: bool
    speculative_adaptive_config: str | None
    cuda_graph_bs_decode: list[int] | None
    cuda_graph_max_bs_decode: int | None
    cuda_graph_max_bs_prefill: int | None
    max_total_num_tokens: int
    disable_radix_cache: bool
    enable_cache_report: bool
    max_req_input_len: int
    launch_command: str


class MemoryUsage(TypedDict):
    weight: float  # GiB
    token_capacity: int


class InternalState(TypedDict):
    """One data-parallel rank's entry of `internal_states`."""

    effective_max_running_requests_per_dp: int
    last_gen_throughput: float
    memory_usage: MemoryUsage
    speculative_num_steps: NotRequired[int]  # speculative servers only
    avg_spec_accept_length: NotRequired[float]  # once a verify round has run


class SimLag(TypedDict):
    last_s: float
    max_s: float
    late_forwards: int
    forwards: int
    behind: bool


class SimStreamDelay(TypedDict):
    mean_ms: float
    max_ms: float
    writes: int


class SimPrefixCache(TypedDict):
    enabled: bool
    hit_tokens: int
    query_tokens: int
    size_tokens: int


class SimFrontend(TypedDict):
    request_ms: float
    prompt_token_us: float
    waiting: int
    served: int
    busy_model_s: float
    wait_model_s: float


class SimFrontendInfo(TypedDict, total=False):
    sim_frontend: SimFrontend  # only when the profile models the tokenizer manager


class SimInfo(SimFrontendInfo):
    """The simulator's own `sim_*` keys of `/server_info` (extensions, not SGLang's)."""

    sim_profile: str
    sim_profile_path: str
    sim_time_scale: float
    sim_seed: int
    sim_model_time_s: float
    sim_lag: SimLag
    sim_stream_delay: SimStreamDelay
    sim_kv_tokens_in_use: int
    sim_kv_waits: int
    sim_retractions: int
    sim_prefix_cache: SimPrefixCache
    sim_skip_zero_step_draft_extend: bool


class ServerInfo(ServerArgs, SimInfo):
    """`GET /server_info` of the simulated server."""

    version: str
    status: str
    internal_states: list[InternalState]


# ---------------------------------------------------------------------------- /sim/ground_truth


class GroundTruthBody(TypedDict):
    """`GET /sim/ground_truth`; its keys are part of the simulator's HTTP API."""

    start: float
    end: float
    window_s: float
    model_window_s: float
    time_scale: float
    output_tokens: int
    output_tok_s: float  # per wall second
    output_tok_s_model: float
    steps: int
    decode_steps: int
    running_reqs_mean: float
    finished_requests: int
    finished_completion_tokens: int
    finished_verify_ct: int
    finished_correct_drafts: int
    accept_length: float | None
    complete: bool
    # With ?requests=1: [arrival, first token, finish, completion tokens] per request.
    requests: NotRequired[list[list[float]]]
