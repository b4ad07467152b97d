"""The agentic set: multi-step tool-using sessions, one row each, replayed at every assistant step.

A session is an agent working in a synthetic repository (`repo`) through emulated tools
(`workspace`), following one of the scenario scripts (`scenarios`), sometimes after an
orientation prelude and sometimes with a second task or a follow-up request.
"""

from __future__ import annotations

import random
from typing import Any

from tools.promptgen.agentic.repo import build_repo
from tools.promptgen.agentic.scenarios import (
    SCENARIO_TOOLS,
    SCENARIOS,
    SECOND_TASKS,
    explore,
    follow_up,
)
from tools.promptgen.agentic.session import Session
from tools.promptgen.agentic.system import REPOS, agent_system
from tools.promptgen.agentic.tools import TOOLS
from tools.promptgen.agentic.workspace import Workspace
from tools.promptgen.model import DEFAULT_SEED, GENERATOR, rng_for

AGENTIC_SESSIONS = 40
# Mostly Python repositories, with a steady share of Go and TypeScript ones.
_LANG_WEIGHTS = {"python": 6, "go": 2, "typescript": 2}


def _agentic_session(seed: int, k: int) -> dict[str, Any]:
    rng = rng_for(seed, "agentic", k)
    names = list(SCENARIOS)
    category = names[k % len(names)]
    func, langs = SCENARIOS[category]
    lang = rng.choices(langs, weights=[_LANG_WEIGHTS[x] for x in langs])[0]
    repo_name = rng.choice([r for r, r_lang in REPOS if r_lang == lang])
    repo = build_repo(rng, repo_name, lang)
    ws = Workspace(repo, rng)
    s = Session(rng, ws)
    s.messages.append({"role": "system", "content": agent_system(rng, repo_name, lang)})
    # Half of the sessions orient themselves first: longer histories, as in real agent traces.
    long_variant = rng.random() < 0.5
    if long_variant:
        s.user("I'm going to give you a task in this repository; first get familiar with it.")
        explore(s, repo, rng)
        s.answer("I've read the README, the project configuration and the main modules. Ready.")
    func(s, repo, rng)
    scenarios = [category]
    if rng.random() < 0.35:
        # A second task in the same session: the longest histories come from these.
        second = rng.choice([n for n in SECOND_TASKS if lang in SCENARIOS[n][1] and n != category])
        SCENARIOS[second][0](s, repo, rng)
        scenarios.append(second)
    if rng.random() < 0.45:
        follow_up(s, repo, rng)
    tools = _offered_tools(rng, [*s.used, *(t for sc in scenarios
                                            for t in SCENARIO_TOOLS.get(sc, ()))])
    return {
        "id": f"agentic/{category}-{k:03d}",
        "workload": "agentic",
        "category": category,
        "messages": s.messages,
        "tools": tools,
        "targets": s.targets,
        "max_tokens": s.caps,
        "meta": {"language": lang, "repo": repo_name, "tasks": scenarios,
                 "long_variant": long_variant, "source": "project", "license": "project",
                 "generator": GENERATOR, "seed": seed},
    }


def _offered_tools(rng: random.Random, needed: list[str]) -> list[dict[str, Any]]:
    """The tools a session sends: those it uses (or its scenario implies) plus a seeded share of
    the rest, 8 to 30 in all, in catalogue order."""
    extra = [t["function"]["name"] for t in TOOLS if t["function"]["name"] not in needed]
    rng.shuffle(extra)
    n_tools = rng.randint(max(8, len(set(needed))), 30)
    keep = set(needed) | set(extra[: max(0, n_tools - len(set(needed)))])
    return [t for t in TOOLS if t["function"]["name"] in keep]


def generate_agentic(seed: int = DEFAULT_SEED) -> list[dict[str, Any]]:
    return [_agentic_session(seed, k) for k in range(AGENTIC_SESSIONS)]
