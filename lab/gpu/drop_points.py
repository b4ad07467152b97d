"""Take one configuration's points of one prompt set out of a run, so `--resume` measures them
again (and, for `tuned`, chooses the set's schedule again from the static curves).

Usage: python3 lab/gpu/drop_points.py RUN_DIR MODE PROMPT_SET [--keep-log-as SUFFIX]

Issue 40's tune run measured a tuned agentic server whose schedule held two drafting K; the
analysis now keeps one (analysis/schedule.py), and the server is measured again with it. The
points' parquet files and manifest entries go; the server's log and adaptive JSON are renamed
with SUFFIX (the old server's evidence stays in the run) or, without it, left to be overwritten.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from specbench.results import measured_keys, point_path, read_manifest


def drop(run_dir: Path, mode: str, prompt_set: str, keep_log_as: str | None) -> list[str]:
    manifest = read_manifest(run_dir)
    keys = sorted((k for k in measured_keys(run_dir)
                   if (k.mode, k.prompt_set) == (mode, prompt_set)),
                  key=lambda k: (k.concurrency, k.repeat))
    for key in keys:
        manifest.points.pop(key.label, None)
        point_path(run_dir, key).unlink()
    if mode == "tuned":
        manifest.tuned.pop(prompt_set, None)
    if mode in manifest.servers:
        manifest.servers[mode].per_prompt_set.pop(prompt_set, None)
    if keep_log_as:
        # The server of one set is `<mode>-<set>` where the sets' servers differ, else `<mode>`.
        servers = run_dir / "servers"
        stem = next((s for s in (f"{mode}-{prompt_set}", mode)
                     if any(servers.glob(f"{s}.log*"))), None)
        for ext in ("log", "log.xz", "adaptive.json"):
            old = servers / f"{stem}.{ext}"
            if stem is not None and old.exists():
                old.rename(old.with_name(f"{stem}.{keep_log_as}.{ext}"))
    manifest.status = "interrupted"
    manifest.save(run_dir)
    return [key.label for key in keys]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("mode")
    parser.add_argument("prompt_set")
    parser.add_argument("--keep-log-as", default=None)
    args = parser.parse_args()
    dropped = drop(args.run_dir, args.mode, args.prompt_set, args.keep_log_as)
    print(f"dropped {len(dropped)} points: {', '.join(dropped) or 'none'}")


if __name__ == "__main__":
    main()
