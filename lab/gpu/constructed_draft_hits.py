"""Where the constructed draft is right, output position by output position (for a sim profile).

The constructed pair (../shared/device/build_constructed_models.py, models/README.md of each real
run) decodes greedily along one fixed cycle of token ids, and its draft proposes the target's
next token unless the current token lies in a random set S of Q x (vocabulary) ids. Every chat
prompt ends in the same template token, so every request generates the same output text, and
its draft is right or wrong at the same output positions: acceptance is not drawn per request,
it is one sequence that all requests walk. This script rebuilds the builder's token maps (same
CPU generator, same order of draws) and prints that sequence for a profile's
``[acceptance] draft_hits_hex``: bit k is 1 where the draft's proposal for output token k+1
(after tokens 0..k) is right.

Needs torch and transformers (an environment with SGLang has both):

    python lab/gpu/constructed_draft_hits.py TOKENIZER_DIR [--q 0.3] [--seed 0]
        [--vocab 32000] [--positions 8192]
"""

from __future__ import annotations

import argparse

SPECIAL_IDS = 3  # bos, eos, pad: outside the cycle, as in the builder


def draft_hits(tokenizer_dir: str, q: float, seed: int, vocab: int, positions: int) -> str:
    import torch
    from transformers import AutoTokenizer

    gen = torch.Generator().manual_seed(seed)
    normal = torch.arange(SPECIAL_IDS, vocab)
    n = normal.numel()
    cycle = normal[torch.randperm(n, generator=gen)]  # greedy decoding walks cycle[i] -> cycle[i+1]
    n_wrong = round(q * n)
    n_wrong = 0 if n_wrong == 1 else n_wrong
    wrong = normal[torch.randperm(n, generator=gen)[:n_wrong]]
    is_wrong = torch.zeros(vocab, dtype=torch.bool)
    is_wrong[wrong] = True
    index_of = {int(t): i for i, t in enumerate(cycle.tolist())}

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    text = tok.apply_chat_template(
        [{"role": "user", "content": "any prompt"}], add_generation_prompt=True, tokenize=False
    )
    last_prompt_id = tok(text, add_special_tokens=False).input_ids[-1]
    first_output = index_of[last_prompt_id] + 1
    # The draft's proposal after output token k is right when that token is not in S.
    along = ~is_wrong[cycle]
    bits = "".join("1" if bool(along[(first_output + k) % n]) else "0" for k in range(positions))
    return "".join(f"{int(bits[i : i + 4], 2):x}" for i in range(0, positions, 4))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tokenizer_dir")
    ap.add_argument("--q", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--positions", type=int, default=8192, help="a multiple of 256")
    args = ap.parse_args()
    if args.positions % 256:
        ap.error("--positions must be a multiple of 256 (64 hex digits a line)")
    hexed = draft_hits(args.tokenizer_dir, args.q, args.seed, args.vocab, args.positions)
    print('draft_hits_hex = """\\')
    for i in range(0, len(hexed), 64):
        print(hexed[i : i + 64] + "\\")
    print('"""')


if __name__ == "__main__":
    main()
