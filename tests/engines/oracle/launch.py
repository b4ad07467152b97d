"""Start SGLang 0.5.23's own HTTP server with the stand-in scheduler (run under SGLang's Python).

    python launch.py MODEL_DIR SGLANG_FLAG...

Builds a tiny local model in MODEL_DIR/target and MODEL_DIR/draft (a word-level byte-level
tokenizer with a chat template and an EOS token, and Llama configs; nothing is downloaded; the
words are the scripts' names and words), then parses the flags with SGLang's own
``prepare_server_args`` and calls SGLang's
``launch_server`` with ``run_scheduler_process_func`` set to the stand-in, so the FastAPI app,
``OpenAIServingChat``/``OpenAIServingCompletion``, the TokenizerManager and the detokenizer
process are SGLang's own. The scripts the stand-in plays are in ``$SPECBENCH_ORACLE_SCRIPTS``.

Children are *spawned*, and each imports this file first (as ``__mp_main__``), so the stub
below is in place in every SGLang process.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from import_stubs import install

install()

EOS = "<|eot|>"
SPECIALS = ["<|unk|>", "<|bos|>", EOS, "<|system|>", "<|user|>", "<|assistant|>"]
# A chat template in the usual shape: one header per turn, EOS after each turn.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|eot|>"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def build_model(root: Path, words: list[str]) -> tuple[Path, Path]:
    """A tokenizer whose tokens are the given words (with a leading space, byte-level), the
    special tokens above; a small Llama config for the target and an EAGLE-3 draft."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for word in words:
        vocab.setdefault("Ġ" + word, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|unk|>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|bos|>", eos_token=EOS, unk_token="<|unk|>",
        additional_special_tokens=SPECIALS[3:],
    )
    fast.chat_template = CHAT_TEMPLATE
    target, draft = root / "target", root / "draft"
    common = {
        "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": len(vocab),
        "max_position_embeddings": 16384, "rms_norm_eps": 1e-5, "torch_dtype": "float32",
        "bos_token_id": vocab["<|bos|>"], "eos_token_id": vocab[EOS],
    }
    for path, config in (
        (target, {**common, "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2}),
        (draft, {**common, "architectures": ["LlamaForCausalLMEagle3"],
                 "num_hidden_layers": 1}),
    ):
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.json").write_text(json.dumps(config))
        fast.save_pretrained(path)
    return target, draft


def main(argv: list[str]) -> None:
    workdir, sglang_argv = Path(argv[0]), argv[1:]
    scripts = json.loads(Path(os.environ["SPECBENCH_ORACLE_SCRIPTS"]).read_text())
    words = sorted({w for steps in scripts.values() for step in steps for w in step} - {"<eos>"})
    build_model(workdir, [*scripts, *words])

    import standin_scheduler
    from sglang.srt.entrypoints.http_server import launch_server
    from sglang.srt.server_args import prepare_server_args

    server_args = prepare_server_args(sglang_argv)
    launch_server(server_args, run_scheduler_process_func=standin_scheduler.run_scheduler_process)


if __name__ == "__main__":
    main(sys.argv[1:])
