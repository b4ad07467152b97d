"""Several snippets of one language joined into one plausible source file.

Imports are merged and de-duplicated at the top and the bodies follow. Java and Bash files hold
one snippet each (one public class, one script per file), so callers pass a single part for them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_IMPORT_LINE = {
    "python": re.compile(r"^(import |from )"),
    "typescript": re.compile(r"^import "),
    "rust": re.compile(r"^use "),
    "cpp": re.compile(r"^#include "),
}


def split_imports(code: str, lang: str) -> tuple[list[str], str]:
    """The import lines at the top of `code` (Go: the packages of its import block) and the rest."""
    if lang == "go":
        body = re.sub(r"^package \w+\n\n", "", code)
        match = re.match(r"import \(\n(.*?)\n\)\n\n", body, re.S)
        if match:
            found = [line.strip() for line in match.group(1).splitlines() if line.strip()]
            return found, body[match.end():]
        single = re.match(r'import ("[^"]+")\n\n', body)
        if single:
            return [single.group(1)], body[single.end():]
        return [], body
    pattern = _IMPORT_LINE.get(lang)
    if pattern is None:
        return [], code
    lines = code.splitlines(keepends=True)
    imports: list[str] = []
    i = 0
    while i < len(lines) and (pattern.match(lines[i]) or not lines[i].strip()):
        if lines[i].strip():
            imports.append(lines[i].rstrip("\n"))
        i += 1
    return imports, "".join(lines[i:])


def _python_imports(lines: list[str]) -> str:
    """Merge import lines the way isort would: __future__ first, then `import x`, then
    `from x import ...` with the names of repeated modules combined."""
    plain: list[str] = []
    names: dict[str, list[str]] = {}
    for line in lines:
        if line.startswith("from "):
            module, _, imported = line[5:].partition(" import ")
            bucket = names.setdefault(module, [])
            bucket.extend(n.strip() for n in imported.split(",") if n.strip() not in bucket)
        elif line not in plain:
            plain.append(line)
    out = [f"from __future__ import {', '.join(sorted(names.pop('__future__')))}\n"
           ] if "__future__" in names else []
    out += sorted(plain)
    out += [f"from {m} import {', '.join(sorted(set(n), key=str.lower))}"
            for m, n in sorted(names.items())]
    return "\n".join(out)


def compose_file(lang: str, parts: Sequence[str], header: str = "", package: str = "app") -> str:
    """Join code parts of one language into one file with merged imports."""
    imports: list[str] = []
    bodies: list[str] = []
    for part in parts:
        found, body = split_imports(part, lang)
        imports.extend(x for x in found if x not in imports)
        bodies.append(body.strip("\n"))
    sep = "\n\n\n" if lang == "python" else "\n\n"
    chunks: list[str] = []
    if header:
        chunks.append(header.rstrip("\n"))
    if lang == "go":
        chunks.append(f"package {package}")
        if imports:
            chunks.append("import (\n" + "\n".join(f"\t{x}" for x in sorted(imports)) + "\n)")
    elif imports:
        if lang == "python":
            chunks.append(_python_imports(imports))
        else:
            chunks.append("\n".join(sorted(imports)))
    head = "\n\n".join(chunks)
    return (head + sep if head else "") + sep.join(bodies) + "\n"

