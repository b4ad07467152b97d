"""Bash snippets: backup rotation, an error summary of log files, waiting for a port."""

# Snippet code is source text kept verbatim; some of its lines are longer than the house limit.
# ruff: noqa: E501
from __future__ import annotations

from tools.promptgen.model import Bug, Snippet

BASH: tuple[Snippet, ...] = (
    Snippet(
        "sh_backup_rotate", "bash", "rotate_backups",
        "creates a dated tar.gz backup of a directory and keeps only the newest N archives",
        "Write a Bash script that takes a source directory and a backup directory, creates "
        "`<name>-YYYYmmdd-HHMMSS.tar.gz` of the source there, and deletes all but the newest KEEP "
        "archives (KEEP defaults to 7, from the environment). Use `set -euo pipefail`, check the "
        "arguments and print a usage line on misuse.",
        r'''#!/usr/bin/env bash
# rotate_backups: archive a directory and keep only the newest $KEEP archives.
set -euo pipefail

usage() { echo "usage: $0 SOURCE_DIR BACKUP_DIR" >&2; exit 2; }

[[ $# -eq 2 ]] || usage
src=$1
dest=$2
keep=${KEEP:-7}
[[ -d $src ]] || { echo "error: $src is not a directory" >&2; exit 2; }
mkdir -p "$dest"

name=$(basename "$src")
stamp=$(date +%Y%m%d-%H%M%S)
archive="$dest/$name-$stamp.tar.gz"
tar -czf "$archive" -C "$(dirname "$src")" "$name"
echo "created $archive"

mapfile -t old < <(ls -1t "$dest"/"$name"-*.tar.gz | tail -n +$((keep + 1)))
for file in "${old[@]}"; do
    rm -f -- "$file"
    echo "removed $file"
done
''',
        {"keep": ("retain", "max_archives"), "archive": ("tarball", "backup_file")},
        (Bug("tail -n +$((keep + 1))", "tail -n +$keep",
             "With KEEP=7 the backup directory only ever holds 6 archives: after each run `ls "
             "backups/ | wc -l` prints 6, and the archive from the run seven days ago is always gone."),),
        (),
    ),
    Snippet(
        "sh_log_summary", "bash", "summarize_errors",
        "summarises the most frequent error messages in log files",
        "Write a Bash script that reads one or more log files (or stdin when none are given), "
        "keeps lines containing ERROR, strips the leading timestamp (first two fields), counts "
        "identical messages and prints the top N (default 10, option -n) as 'count message', "
        "most frequent first.",
        r'''#!/usr/bin/env bash
# summarize_errors: top ERROR messages across log files.
set -euo pipefail

top=10
while getopts "n:" opt; do
    case $opt in
        n) top=$OPTARG ;;
        *) echo "usage: $0 [-n TOP] [LOG...]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))

cat -- "${@:--}" \
    | grep -F 'ERROR' \
    | cut -d' ' -f3- \
    | sort \
    | uniq -c \
    | sort -rn \
    | head -n "$top"
''',
        {"top": ("limit", "count")},
        (Bug("    | sort \\\n    | uniq -c", "    | uniq -c",
             "The summary shows the same message several times with small counts, e.g. '3 ERROR db "
             "timeout' on one line and '2 ERROR db timeout' a few lines further down, instead of one "
             "line with 5."),),
        (),
    ),
    Snippet(
        "sh_wait_for_port", "bash", "wait_for_port",
        "waits until a TCP port accepts connections or a timeout expires",
        "Write a Bash function `wait_for_port HOST PORT TIMEOUT_S` that polls every 0.5 s using "
        "bash's /dev/tcp until a connection succeeds (exit 0) or TIMEOUT_S seconds pass (print an "
        "error to stderr and return 1).",
        r'''#!/usr/bin/env bash
# wait_for_port: block until HOST:PORT accepts TCP connections.
set -euo pipefail

wait_for_port() {
    local host=$1 port=$2 timeout_s=$3
    local deadline=$((SECONDS + timeout_s))
    while ((SECONDS < deadline)); do
        if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.5
    done
    echo "error: $host:$port not reachable after ${timeout_s}s" >&2
    return 1
}

wait_for_port "${1:-127.0.0.1}" "${2:-8080}" "${3:-30}"
''',
        {"wait_for_port": ("await_port", "wait_tcp"), "deadline": ("give_up_at", "until_s")},
        (Bug("        sleep 0.5\n", "",
             "On the CI runner the readiness step pins one CPU core at 100% for the whole wait, and "
             "the service it waits for starts noticeably slower than when started by hand."),),
        (),
    ),
)
