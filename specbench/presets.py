"""Named option layers: the `--preset`s and what `specbench tune` adds under them.

Plain dicts in the shape of a config file, merged by :func:`specbench.config.resolve` under
the config file and the command line.
"""

from __future__ import annotations

from typing import Any

from specbench import configurations

# `specbench tune`: EAGLE-3 at several K, zero-step and SGLang's default adaptive schedule, then
# the tuned schedule measured. Under the preset, the config file and the command line. A 6 s
# window at 5x keeps the eight configurations within about ten minutes on a 2-core machine.
TUNE_LAYER: dict[str, Any] = {
    "modes": list(configurations.TUNE_NAMES),
    "load": {"window_s": 6.0},
    "sim": {"time_scale": 5.0},
}

# Named option sets, applied under the config file and the command line. Windows are in
# simulated-GPU seconds; the sim time scale only changes wall time, not the numbers.
PRESETS: dict[str, dict[str, Any]] = {
    # A demo in about a minute: four levels spanning both crossovers, short windows, and a
    # slightly faster simulator (numbers stay in GPU time; the client_bound flag says where
    # the client could not keep up).
    "quick": {
        "concurrency": [1, 16, 64, 250],
        # One round around T: on this sparse grid T moves far with each round's points.
        "straddle_rounds": 1,
        "load": {"warmup_s": 1.0, "warmup_max_s": 10.0, "window_s": 3.0},
        "sim": {"time_scale": 5.0},
    },
    # The CI regression job: levels bracketing the simulated decisions (coding c* 35
    # and T 87, agentic T 13; results/reference/README.md), fixed seeds, 4x real time so one
    # sweep takes about two and a half minutes on a 2-core runner (157 s; 3x took 206 s) while
    # the client stays well below the client_bound flag (client and server 33% of one core).
    # 250 is left out: it costs the most warmup and the client is the bottleneck there. A
    # fixed threshold: an auto one moves between identical runs where the ratio is flat near a
    # crossing, flipping the dynamic server at a level between drafting and not; 24 sits
    # between grid levels, so every grid level is cleanly on one side of it. For the same
    # reason no straddle levels: at T-1, T, T+1 whether a step drafts depends on request timing,
    # so the gate could not judge them, and they would add 12 points to its 46.
    "ci": {
        "concurrency": [8, 16, 32, 64, 128],
        "threshold": 24,
        "straddle_rounds": 0,
        "load": {"warmup_s": 1.0, "warmup_max_s": 20.0, "window_s": 4.0, "seed": 0},
        "sim": {"seed": 0, "time_scale": 4.0},
    },
}
