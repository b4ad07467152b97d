"""The code corpus: project-written snippets in eight languages that every prompt is built from.

Each snippet is real code with concrete names. `renames` lists identifiers the generator may swap
(word-boundary replacement in code, spec, summary and bug text alike), so one snippet yields
several distinct prompts. A bug is a (correct text -> buggy text) swap plus the failure a
developer would see; `{file}` and `{line}` in the symptom are filled in per prompt.

The order of SNIPPETS matters: seeded draws pick by position, so reordering changes the sets.
"""

from __future__ import annotations

from tools.promptgen.corpus.bash import BASH
from tools.promptgen.corpus.cpp import CPP
from tools.promptgen.corpus.go import GO
from tools.promptgen.corpus.java import JAVA
from tools.promptgen.corpus.python_1 import PYTHON_1
from tools.promptgen.corpus.python_2 import PYTHON_2
from tools.promptgen.corpus.rust import RUST
from tools.promptgen.corpus.sql import SQL
from tools.promptgen.corpus.typescript import TYPESCRIPT
from tools.promptgen.model import Snippet

SNIPPETS: tuple[Snippet, ...] = (
    *PYTHON_1, *PYTHON_2, *TYPESCRIPT, *GO, *RUST, *JAVA, *CPP, *SQL, *BASH,
)


def snippets_of(lang: str) -> list[Snippet]:
    """The snippets of one language, in corpus order."""
    return [s for s in SNIPPETS if s.lang == lang]
