"""A profile that differs from another only in its acceptance: the second-acceptance check.

The constructed pair at another per-token draft acceptance (Q = 0.5: the draft is wrong on half
of the token ids) shares the target, the SGLang build and the host with the pair a profile was
fitted to, so the profile should predict it with nothing but its ``[acceptance]`` changed: the
per-token alpha and the draft-hit sequence of the new pair. This writes that profile (every other
line kept, the name and ground truth saying what it is):

    python3 lab/gpu/acceptance_variant.py llama-3.1-8b-1xh200-flashinfer 0.5 \
        lab/gpu/draft_hits_q0.5.txt > /tmp/fi-q0.5.toml

The hits file is what ``constructed_draft_hits.py TOKENIZER --q 0.5`` prints (it needs torch;
draft_hits_q0.5.txt is its output for the kit's tokenizer, committed so that this needs none).
lab/notes/benchmarks.md ("the second acceptance") runs the variant against the real Q = 0.5 run.
"""

from __future__ import annotations

import re
import sys

from specbench.sim.profile import load_profile, resolve_profile_path


def variant(base: str, alpha: float, hits_block: str) -> str:
    text = resolve_profile_path(base).read_text()
    name = load_profile(base).name
    new_name = f"{name}-alpha{alpha:g}"
    hits = re.search(r'draft_hits_hex = """\\\n.*?"""', text, flags=re.S)
    new_hits = re.search(r'draft_hits_hex = """\\\n.*?"""', hits_block, flags=re.S)
    if hits is None or new_hits is None:
        raise SystemExit("acceptance_variant: no draft_hits_hex block in the base or the hits file")
    replacements = [
        (r'^name = ".*"$', f'name = "{new_name}"'),
        (
            r'^ground_truth = ".*"$',
            f'ground_truth = "{name} with only its acceptance changed: per-token alpha '
            f'{alpha:g} and the draft-hit sequence of the constructed pair at that acceptance."',
        ),
        (r"^default_alpha = .*$", f"default_alpha = {alpha:g}"),
        (r"^agentic_alpha = .*$", f"agentic_alpha = {alpha:g}"),
    ]
    for pattern, line in replacements:
        text, n = re.subn(pattern, line, text, count=1, flags=re.M)
        if n != 1:
            raise SystemExit(f"acceptance_variant: {pattern!r} not found once in {base}")
    return text.replace(hits.group(0), new_hits.group(0))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    with open(sys.argv[3]) as f:
        sys.stdout.write(variant(sys.argv[1], float(sys.argv[2]), f.read()))
