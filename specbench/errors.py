"""The one family of errors a user can cause.

Every error that is the user's to fix (a bad option, an unreadable file, a server that will not
start) subclasses :class:`UserError`. Its message is one line, the cause and then the fix,
separated by "; ". The CLI catches `UserError` in one place, prints the message and exits 2;
anything else is a bug in specbench and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix; `str(exc)` is the whole message (cause; fix)."""


class ConfigError(UserError, ValueError):
    """A bad option, preset or config file value."""
