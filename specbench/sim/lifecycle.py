"""Process-level safety of the simulated server: die with the parent that launched it.

Kept tiny and import-light so that ``python -m specbench.sim`` can arm it before importing
aiohttp and the rest: a harness killed with SIGKILL must not leave a server holding its port.
"""

from __future__ import annotations

import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def set_parent_death_signal(sig: int = signal.SIGTERM) -> None:
    """Ask Linux to send `sig` when the parent process dies (no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        # The parent died before the request took effect: nobody will signal us.
        os.kill(os.getpid(), sig)
