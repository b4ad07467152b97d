"""Stand-ins for packages SGLang imports but the contract tests never use (run under SGLang's
interpreter; standard library only, so any script can load it by path).

torchvision: PyPI's build does not load beside the CPU-only torch wheel of the contract venv;
``datasets``: SGLang's benchmark client imports it at start-up. A stubbed module answers every
attribute with a class, so ``from torchvision.transforms import InterpolationMode`` works; only
roots that are really missing are stubbed.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterable
from typing import Any


class _Anything(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(name, (), {})

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots: set[str]) -> None:
        self.roots = roots

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__version__ = "0.0.0"  # type: ignore[attr-defined]
        module.__getattr__ = lambda attr: _Anything.__getattr__(_Anything, attr)  # type: ignore[method-assign]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def install(roots: Iterable[str] = ("torchvision",)) -> None:
    """Stub each of `roots` that cannot be imported here."""
    missing = {root for root in roots if importlib.util.find_spec(root) is None}
    if missing:
        sys.meta_path.append(_StubFinder(missing))
