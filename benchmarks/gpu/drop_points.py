"""Take one configuration's points of one prompt set out of a run, so `--resume` measures them
again (and, for `tuned`, chooses the set's schedule again from the static curves).

Usage: python3 benchmarks/gpu/drop_points.py RUN_DIR MODE PROMPT_SET [--keep-log-as SUFFIX]

Issue 40's tune run measured a tuned agentic server whose schedule held two drafting K; the
analysis now keeps one (analysis/schedule.py), and the server is measured again with it. The
points' parquet files and manifest entries go; the server's log and adaptive JSON are renamed
with SUFFIX (the old server's evidence stays in the run) or, without it, left to be overwritten.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def drop(run_dir: Path, mode: str, prompt_set: str, keep_log_as: str | None) -> list[str]:
    manifest_path = run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    prefix = f"{mode}/{prompt_set}/"
    dropped = [key for key in manifest["points"] if key.startswith(prefix)]
    for key in dropped:
        del manifest["points"][key]
        (run_dir / "points" / f"{key}.parquet").unlink(missing_ok=True)
    if mode == "tuned":
        manifest["tuned"].pop(prompt_set, None)
    server = manifest["servers"].get(mode, {})
    server.get("per_prompt_set", {}).pop(prompt_set, None)
    if keep_log_as:
        # The server of one set is `<mode>-<set>` where the sets' servers differ, else `<mode>`.
        servers = run_dir / "servers"
        stem = next((s for s in (f"{mode}-{prompt_set}", mode)
                     if any(servers.glob(f"{s}.log*"))), None)
        for ext in ("log", "log.xz", "adaptive.json"):
            old = servers / f"{stem}.{ext}"
            if stem is not None and old.exists():
                old.rename(old.with_name(f"{stem}.{keep_log_as}.{ext}"))
    manifest["status"] = "interrupted"
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return dropped


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
