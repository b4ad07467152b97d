"""A prompt set whose output caps are the lengths a simulator profile's requests stop at.

The constructed models never emit EOS, so on them every request runs to its row's max_tokens
(256-4,096 on the coding set, about 1,000 on average). The simulator's profiles stop each
request at a "natural" length (log-normal around the workload's mean, 380 tokens for coding).
A real run with this file's caps has the output lengths of a simulated run without EOS, so the
two answer the same workload (issue 37: the default sweep's c* against a real server's).

    python3 lab/gpu/default_lengths.py coding llama-3.1-8b-1xh200 > /tmp/coding-deflen.jsonl

With `--equal`, every cap is the mean of those draws instead: the same mean output length,
but requests that start together end together (what benchmark clients that cap every request
alike measure), against the staggered ends of the drawn caps.

Draws use the simulator's own law (`TraitModel.kind`'s mean per rule or kind of prompt,
`natural_output_tokens`' sigma and 16x-mean cap), each seeded by the row id and turn, not by
the simulator's digest of the rendered text: the distribution is the same, and the file needs
no server's rendering.
"""

from __future__ import annotations

import argparse
import json
import random
import sys

from specbench.prompts import load_prompt_set
from specbench.sim.profile import load_profile
from specbench.sim.workload import TraitModel, natural_output_tokens


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prompt_set", help="a built-in set name or a .jsonl path")
    parser.add_argument("profile", help="a simulator profile name or .toml path")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--equal", action="store_true",
                        help="every cap the mean of the drawn ones (outputs that end together)")
    args = parser.parse_args()
    workload = load_profile(args.profile).workload
    kinds = TraitModel(workload, args.seed)
    prompt_set = load_prompt_set(args.prompt_set)
    capped = 0
    rows = []
    for line in prompt_set.path.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        text = "\n".join(str(m.get("content") or "") for m in row.get("messages", []))
        _, _, mean = kinds.kind(text, agentic=row.get("workload") == "agentic" or "tools" in row)
        multiturn = isinstance(row.get("max_tokens"), list)  # one cap per user turn
        caps = row["max_tokens"] if multiturn else [row.get("max_tokens", 0)]
        new_caps = []
        for turn, cap in enumerate(caps):
            rng = random.Random(f"{args.seed}\x00{row['id']}\x00{turn}")
            draw = natural_output_tokens(rng.gauss(0.0, 1.0), mean, workload.output_tokens_sigma)
            capped += bool(cap) and draw >= cap
            new_caps.append(min(draw, cap) if cap else draw)
        row["max_tokens"] = new_caps if multiturn else new_caps[0]
        rows.append(row)
    drawn = [c for row in rows for c in (row["max_tokens"] if isinstance(row["max_tokens"], list)
                                          else [row["max_tokens"]])]
    mean = round(sum(drawn) / len(drawn))
    for row in rows:
        if args.equal:
            caps = row["max_tokens"]
            row["max_tokens"] = [mean] * len(caps) if isinstance(caps, list) else mean
        sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"mean cap {mean} tokens{' (every cap)' if args.equal else ''}", file=sys.stderr)
    print(f"{capped} requests at their row's cap, the rest at the drawn length", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
