"""Tool calls answered from the synthetic repository: file tools really read and edit it, git
tools diff it against its last snapshot, and test runners print output that depends on its state.

Realistic tool output is the point: on a real GPU, what an agent's history looks like changes
EAGLE-3's acceptance, so pytest banners and `git status` lines are emulated faithfully.
"""

from __future__ import annotations

import difflib
import random
import re
from collections.abc import Callable
from typing import Any

from tools.promptgen.agentic.repo import Repo


def numbered(text: str, start: int = 1, end: int | None = None) -> str:
    """Lines `start`..`end` as read_file shows them: a right-aligned number, a tab, the line."""
    lines = text.splitlines()
    end = len(lines) if end is None else min(end, len(lines))
    return "\n".join(f"{n:6d}\t{lines[n - 1]}" for n in range(start, end + 1))


def edit_hunk(before: str, after: str, context: int = 1) -> tuple[str, str]:
    """The smallest unique (old_str, new_str) pair, in whole lines, that turns before into after."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    ops = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    i1, i2, j1, j2 = ops[0][1], ops[-1][2], ops[0][3], ops[-1][4]
    while True:
        lo_a, hi_a = max(0, i1 - context), min(len(a), i2 + context)
        old = "".join(a[lo_a:hi_a])
        if before.count(old) == 1 or (lo_a == 0 and hi_a == len(a)):
            new = "".join(b[max(0, j1 - (i1 - lo_a)): j2 + (hi_a - i2)])
            return old.rstrip("\n"), new.rstrip("\n")
        context += 1


class Workspace:
    """Answers tool calls from the synthetic repository; file tools really read and edit it."""

    def __init__(self, repo: Repo, rng: random.Random) -> None:
        self.repo = repo
        self.rng = rng
        # (path, buggy text, test id, failure text): tests fail while the file is still buggy.
        self.failure: tuple[str, str, str, str] | None = None
        # The tools emulated here. Scenario steps give the output of every other tool themselves.
        self.handlers: dict[str, Callable[..., str]] = {
            "read_file": self.read_file, "write_file": self.write_file,
            "str_replace": self.str_replace, "list_dir": self.list_dir, "glob": self.glob,
            "grep": self.grep, "git_diff": self.git_diff, "git_status": self.git_status,
            "git_commit": self.git_commit, "create_branch": self.create_branch,
            "todo_write": self.todo_write, "run_tests": self.run_tests,
        }

    def run(self, tool: str, args: dict[str, Any]) -> str:
        handler = self.handlers.get(tool)
        if handler is None:
            raise KeyError(f"{tool} is not simulated; give its output in the step")
        return handler(**args)

    # --- files

    def read_file(self, path: str, start_line: int = 1, end_line: int | None = None) -> str:
        if path not in self.repo.files:
            return f"error: {path}: no such file"
        return numbered(self.repo.files[path], start_line, end_line)

    def write_file(self, path: str, content: str) -> str:
        self.repo.files[path] = content
        return f"wrote {len(content.encode())} bytes to {path}"

    def str_replace(self, path: str, old_str: str, new_str: str) -> str:
        text = self.repo.files[path]
        if text.count(old_str) != 1:
            raise ValueError(f"str_replace target not unique in {path}")
        pos = text.index(old_str)
        self.repo.files[path] = text.replace(old_str, new_str, 1)
        first = text.count("\n", 0, pos) + 1
        last = first + new_str.count("\n")
        return (f"edited {path}; lines {max(1, first - 2)}-{last + 2} now read:\n"
                + numbered(self.repo.files[path], max(1, first - 2), last + 2))

    def list_dir(self, path: str, depth: int = 1) -> str:
        prefix = "" if path in (".", "") else path.rstrip("/") + "/"
        entries: list[str] = []
        for p in sorted(self.repo.files):
            if not p.startswith(prefix):
                continue
            rest = p[len(prefix):].split("/")
            for level in range(1, min(depth, len(rest)) + 1):
                entry = "/".join(rest[:level]) + ("/" if level < len(rest) else "")
                if entry not in entries:
                    entries.append(entry)
        return "\n".join(entries) if entries else f"error: {path}: no such folder"

    def glob(self, pattern: str) -> str:
        rx = re.compile("^" + re.escape(pattern).replace(r"\*\*/", "(.*/)?").replace(r"\*", "[^/]*")
                        + "$")
        return "\n".join(p for p in sorted(self.repo.files) if rx.match(p)) or "no matches"

    def grep(self, pattern: str, path: str = ".", include: str | None = None,
             ignore_case: bool = False) -> str:
        rx = re.compile(pattern, re.I if ignore_case else 0)
        ext = include.lstrip("*") if include else ""
        hits = []
        for p in sorted(self.repo.files):
            if path not in (".", "") and not p.startswith(path.rstrip("/")):
                continue
            if ext and not p.endswith(ext):
                continue
            for n, line in enumerate(self.repo.files[p].splitlines(), start=1):
                if rx.search(line):
                    hits.append(f"{p}:{n}:{line}")
        return "\n".join(hits[:100]) or "no matches"

    # --- git and planning

    def _changed(self) -> list[str]:
        return [p for p in sorted(self.repo.files)
                if self.repo.original.get(p) != self.repo.files[p]]

    def git_diff(self, path: str | None = None, staged: bool = False) -> str:
        chunks: list[str] = []
        for p in sorted(set(self.repo.files) | set(self.repo.original)):
            if path and p != path:
                continue
            before, after = self.repo.original.get(p, ""), self.repo.files.get(p, "")
            if before != after:
                chunks.extend(difflib.unified_diff(before.splitlines(), after.splitlines(),
                                                   f"a/{p}", f"b/{p}", lineterm=""))
        return "\n".join(chunks) or "no changes"

    def git_status(self) -> str:
        lines = [f" M {p}" if p in self.repo.original else f"?? {p}" for p in self._changed()]
        return "On branch main\n" + ("\n".join(lines) if lines
                                     else "nothing to commit, working tree clean")

    def git_commit(self, message: str) -> str:
        changed = len(self._changed())
        sha = "".join(self.rng.choice("0123456789abcdef") for _ in range(7))
        plural = "s" if changed != 1 else ""
        return f"[main {sha}] {message.splitlines()[0]}\n {changed} file{plural} changed"

    def create_branch(self, name: str) -> str:
        return f"Switched to a new branch '{name}'"

    def todo_write(self, items: list[dict[str, str]]) -> str:
        marks = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]"}
        return "todo list updated:\n" + "\n".join(f"{marks[i['status']]} {i['text']}"
                                                  for i in items)

    # --- test runners: output depends on the repository state, so a fix really turns them green.

    def _failing(self) -> tuple[str, str] | None:
        if self.failure and self.repo.files.get(self.failure[0]) == self.failure[1]:
            return self.failure[2], self.failure[3]
        return None

    def run_tests(self, path: str | None = None, filter: str | None = None,
                  verbose: bool = False) -> str:
        failing = self._failing()
        if failing and path and not failing[0].startswith(path):
            failing = None
        test_files = [p for p in sorted(self.repo.files)
                      if (p.startswith("tests/test_") and p.endswith(".py"))
                      or p.endswith(("_test.go", ".test.ts"))]
        if path:
            test_files = [p for p in test_files if p.startswith(path)] or test_files
        duration = f"{self.rng.uniform(0.2, 3.5):.2f}"
        if self.repo.lang == "python":
            return self._pytest(test_files, failing, duration)
        if self.repo.lang == "go":
            return self._go_test(failing)
        return self._jest(test_files, failing, duration)

    def _pytest(self, test_files: list[str], failing: tuple[str, str] | None,
                duration: str) -> str:
        counts = {p: max(1, self.repo.files[p].count("\ndef test_")) for p in test_files}
        total = sum(counts.values())
        lines = [" test session starts ".center(80, "="),
                 "platform linux -- Python 3.11.9, pytest-8.2.2, pluggy-1.5.0",
                 f"rootdir: /workspace/{self.repo.name}", "configfile: pyproject.toml",
                 f"collected {total} items", ""]
        done = 0
        for p, n in counts.items():
            done += n
            marks = "." * n
            if failing and failing[0].startswith(p):
                marks = marks[:-1] + "F"
            lines.append(f"{p} {marks}".ljust(73) + f"[{round(100 * done / total):3d}%]")
        if not failing:
            return "\n".join([*lines, "", f" {total} passed in {duration}s ".center(80, "=")])
        name = failing[0].split("::")[-1]
        lines += ["", " FAILURES ".center(80, "="), f" {name} ".center(80, "_"), failing[1], "",
                  " short test summary info ".center(80, "="), f"FAILED {failing[0]}",
                  f" 1 failed, {total - 1} passed in {duration}s ".center(80, "=")]
        return "\n".join(lines)

    def _go_test(self, failing: tuple[str, str] | None) -> str:
        module = f"example.com/{self.repo.name}"
        if failing:
            return f"{failing[1]}\nok  \t{module}/internal/store\t0.{self.rng.randint(10, 99)}1s"
        pkgs = sorted({p.rsplit("/", 1)[0] for p in self.repo.files if p.endswith(".go")})
        return "\n".join(f"ok  \t{module}/{p}\t0.{self.rng.randint(10, 99)}2s" for p in pkgs)

    def _jest(self, test_files: list[str], failing: tuple[str, str] | None,
              duration: str) -> str:
        n_tests = sum(self.repo.files[p].count("test(") for p in test_files)
        n_files = len(test_files)
        if failing:
            return (f"{failing[1]}\n\n"
                    f"Test Suites: 1 failed, {n_files - 1} passed, {n_files} total\n"
                    f"Tests:       1 failed, {n_tests - 1} passed, {n_tests} total\n"
                    f"Time:        {duration} s")
        return "\n".join([*(f"PASS {p}" for p in test_files), "",
                          f"Test Suites: {n_files} passed, {n_files} total",
                          f"Tests:       {n_tests} passed, {n_tests} total",
                          f"Time:        {duration} s", "Ran all test suites."])
