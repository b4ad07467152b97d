"""The tool catalogue agent sessions offer: 32 function schemas in OpenAI's format.

A session sends the tools it uses plus a seeded share of the others (8 to 30 in all), as real
agent front ends send their whole catalogue whatever the task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _tool(name: str, description: str, props: dict[str, Any],
          required: Sequence[str]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": props, "required": list(required)}}}


def _s(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _i(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "integer", "description": description, **extra}


def _b(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


_PATH = "Path relative to the workspace root."

TOOLS: tuple[dict[str, Any], ...] = (
    _tool("read_file", "Read a text file from the workspace. Returns the content with line numbers "
          "(number, tab, line). Use start_line and end_line to read part of a large file; both are "
          "1-based and inclusive. Binary files are refused.",
          {"path": _s(_PATH),
           "start_line": _i("First line to return (1-based).", minimum=1),
           "end_line": _i("Last line to return (inclusive).", minimum=1)}, ["path"]),
    _tool("write_file", "Create a file or overwrite it completely with the given content. Parent "
          "folders are created. Prefer str_replace for small changes to existing files.",
          {"path": _s(_PATH), "content": _s("The full new content.")}, ["path", "content"]),
    _tool("str_replace", "Replace exactly one occurrence of old_str with new_str in a file. "
          "old_str must match the file byte for byte, including indentation, and must be unique "
          "in the file; include surrounding lines to make it unique. Returns the edited region.",
          {"path": _s(_PATH),
           "old_str": _s("Text to find; must occur exactly once."),
           "new_str": _s("Replacement text; may be empty to delete.")},
          ["path", "old_str", "new_str"]),
    _tool("insert_lines", "Insert text after the given line of a file (0 inserts at the top).",
          {"path": _s(_PATH),
           "after_line": _i("Line number to insert after.", minimum=0),
           "text": _s("Text to insert.")}, ["path", "after_line", "text"]),
    _tool("delete_file", "Delete a file from the workspace. Fails for folders.",
          {"path": _s(_PATH)}, ["path"]),
    _tool("move_file", "Move or rename a file inside the workspace.",
          {"source": _s("Existing path."), "destination": _s("New path.")},
          ["source", "destination"]),
    _tool("list_dir", "List the entries of a folder. Folders end with '/'. Hidden entries and "
          "build output folders are skipped.",
          {"path": _s("Folder relative to the workspace root; '.' for the root."),
           "depth": _i("How many levels to descend (default 1).", minimum=1, maximum=4)},
          ["path"]),
    _tool("glob", "Find files whose path matches a glob pattern such as 'src/**/*.py'.",
          {"pattern": _s("Glob pattern relative to the workspace root.")}, ["pattern"]),
    _tool("grep", "Search file contents with a regular expression (Python syntax). Returns "
          "'path:line:text' for each matching line, at most 100 matches.",
          {"pattern": _s("Regular expression."),
           "path": _s("Folder or file to search (default: workspace root)."),
           "include": _s("Only search files matching this glob, e.g. '*.py'."),
           "ignore_case": _b("Case-insensitive search.")}, ["pattern"]),
    _tool("run_tests", "Run the project's test suite, or part of it, and return the runner's "
          "output. Takes the test command from the project configuration.",
          {"path": _s("Test file or folder to run (default: all tests)."),
           "filter": _s("Only run tests whose name contains this text."),
           "verbose": _b("Print one line per test.")}, []),
    _tool("run_bash", "Run a shell command in the workspace with bash and return its combined "
          "stdout and stderr. Commands time out after 120 seconds. Do not start servers that keep "
          "running; use background jobs with care.",
          {"command": _s("The command line to run."),
           "timeout_s": _i("Timeout in seconds (max 600).", maximum=600)}, ["command"]),
    _tool("git_status", "Show changed, staged and untracked files.", {}, []),
    _tool("git_diff", "Show the unified diff of uncommitted changes, optionally for one path.",
          {"path": _s("Limit the diff to this path."), "staged": _b("Show staged changes only.")},
          []),
    _tool("git_log", "Show recent commits (hash, author, date, subject).",
          {"path": _s("Only commits touching this path."),
           "max_count": _i("Number of commits (default 10).", minimum=1)}, []),
    _tool("git_commit", "Stage all changes and create a commit with the given message.",
          {"message": _s("Commit message: a short subject line, a blank line, then details.")},
          ["message"]),
    _tool("create_branch", "Create a new git branch from the current HEAD and switch to it.",
          {"name": _s("Branch name, e.g. 'fix/rate-limit-refill'.")}, ["name"]),
    _tool("open_pull_request", "Push the current branch and open a pull request.",
          {"title": _s("Pull request title."), "body": _s("Markdown description."),
           "draft": _b("Open as a draft.")}, ["title", "body"]),
    _tool("list_ci_runs", "List recent CI runs for a branch with their status and run id.",
          {"branch": _s("Branch name (default: current branch)."),
           "limit": _i("How many runs (default 5).", minimum=1)}, []),
    _tool("get_ci_logs", "Fetch the log of one CI job. Long logs are cut to the last lines.",
          {"run_id": _i("Run id from list_ci_runs."),
           "job": _s("Job name, e.g. 'lint' or 'test'.")}, ["run_id"]),
    _tool("http_get", "Send an HTTP GET request from the sandbox and return status, selected "
          "headers and the body (cut at 20,000 characters). Only hosts on the allow list are "
          "reachable.",
          {"url": _s("Absolute URL."),
           "headers": {"type": "object", "description": "Extra request headers.",
                       "additionalProperties": {"type": "string"}}}, ["url"]),
    _tool("http_post", "Send an HTTP POST request with a JSON body and return the response.",
          {"url": _s("Absolute URL."),
           "json_body": {"type": "object", "description": "JSON body to send."}},
          ["url", "json_body"]),
    _tool("list_tables", "List the tables of the analytics database with approximate row counts.",
          {}, []),
    _tool("describe_table", "Show the columns, types and indexes of one table.",
          {"table": _s("Table name.")}, ["table"]),
    _tool("sql_query", "Run a read-only SQL query (PostgreSQL dialect) against the analytics "
          "database and return at most 200 rows as a text table. Statements that modify data are "
          "rejected.",
          {"query": _s("A single SELECT or WITH statement.")}, ["query"]),
    _tool("search_docs", "Search the internal engineering documentation and return the best "
          "matching passages with their page titles.",
          {"query": _s("What to look for."),
           "limit": _i("Maximum passages (default 5).", minimum=1, maximum=20)}, ["query"]),
    _tool("get_issue", "Read an issue from the tracker, including its comments.",
          {"number": _i("Issue number.")}, ["number"]),
    _tool("comment_on_issue", "Add a comment to an issue.",
          {"number": _i("Issue number."), "body": _s("Markdown comment.")}, ["number", "body"]),
    _tool("todo_write", "Replace the agent's todo list. Use it to plan multi-step work and to mark "
          "progress; the list is shown back to you.",
          {"items": {"type": "array", "description": "The whole list, in order.", "items": {
              "type": "object",
              "properties": {"text": _s("What to do."),
                             "status": _s("State.", enum=["pending", "in_progress", "done"])},
              "required": ["text", "status"]}}}, ["items"]),
    _tool("ask_user", "Ask the user a clarifying question and wait for the answer. Use sparingly.",
          {"question": _s("The question.")}, ["question"]),
    _tool("format_code", "Run the project's formatter on the given paths and report changed files.",
          {"paths": {"type": "array", "items": {"type": "string"},
                     "description": "Files or folders."}}, ["paths"]),
    _tool("lint", "Run the project's linters and return their findings as "
          "'path:line:col: code message'.",
          {"paths": {"type": "array", "items": {"type": "string"},
                     "description": "Files or folders (default: all)."}}, []),
    _tool("install_package", "Install or upgrade a dependency with the project's package manager "
          "and update the lock file.",
          {"name": _s("Package name."), "version": _s("Version specifier, e.g. '>=2.1,<3'.")},
          ["name"]),
)
