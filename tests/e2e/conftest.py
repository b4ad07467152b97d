"""Fixtures for end-to-end tests that run the real `specbench` command against the simulator.

The helpers themselves are in tests/harness.py (shared with tests/engines).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from specbench.engines.process import free_port
from tests.harness import assert_no_process_left


@pytest.fixture
def port() -> Iterator[int]:
    """A free port for the sweep's servers; after the test, nothing of specbench runs on it."""
    port = free_port()
    yield port
    # A little grace: a CLI run that refused its input may still be exiting on a busy machine.
    assert_no_process_left(port, wait_s=5.0)
