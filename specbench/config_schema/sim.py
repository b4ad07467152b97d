"""The simulated server's section (`python -m specbench.sim ... --sim-*`)."""

from __future__ import annotations

from specbench.config_schema.fields import SIM_DEFAULT_PROFILE, Section, option


class SimConfig(Section):
    """Options of the simulated server (`python -m specbench.sim ... --sim-*`)."""

    profile: str = option(
        SIM_DEFAULT_PROFILE, "simulator profile name or TOML path", cli="--sim-profile"
    )
    # >1 runs the model faster than real time; every reported time is converted back to
    # simulated-GPU time, so the numbers do not depend on this. 4x keeps a 2-core machine's
    # client within 1% of the simulator's ground truth at 250 users (tests/load) and a full
    # default sweep under 10 minutes.
    time_scale: float = option(
        4.0, "simulator speed-up over real time", cli="--sim-time-scale", gt=0
    )
    seed: int = option(0, "simulator seed", cli="--sim-seed")
    extra_args: tuple[str, ...] = option(
        (), "extra --sim-* flag(s), repeatable", cli="--sim-arg", parse="shlex_each"
    )
