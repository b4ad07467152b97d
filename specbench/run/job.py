"""What the plan hands the sweep: one server launch and the points it measures."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.configurations import Schedule, ServerConfiguration
from specbench.results import PointKey


@dataclass(frozen=True)
class Job:
    """One server launch: a configuration with one schedule, for the prompt sets that share
    it, and the points it measures."""

    config: ServerConfiguration
    schedule: Schedule | None
    prompt_sets: list[str]
    keys: list[PointKey]
    label: str | None  # the sets' names where one configuration runs several schedules
