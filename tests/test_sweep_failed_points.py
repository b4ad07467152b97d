"""When a point is not a measurement: the rule of `verdicts.failed_requests` (docs/errors.md)."""

from __future__ import annotations

import dataclasses

from specbench.run.verdicts import failed_requests
from tests.test_metrics import point, rec


def test_no_success_and_answered_failures_is_not_a_measurement() -> None:
    errors = [rec([], 0.0, 1.0 + i, status="error", error_class="http_status", request_id=i)
              for i in range(3)]
    said = failed_requests(point(errors))
    assert said is not None and said.startswith("all 3 requests in the window failed")


def test_one_success_keeps_the_point() -> None:
    records = [rec([(1.0, 5)], 0.0, 2.0),
               *(rec([], 0.0, 1.0, status="error", error_class="http_status", request_id=i)
                 for i in range(1, 20))]
    assert failed_requests(point(records)) is None


def test_timeouts_alone_keep_the_point() -> None:
    # A timeout is the client's limit (--request-timeout-s), not the server's answer.
    records = [rec([(1.0, 5)], 0.0, 2.0, status="error", error_class="timeout", request_id=i)
               for i in range(4)]
    assert failed_requests(point(records)) is None


def test_the_most_common_answer_is_quoted_in_120_characters() -> None:
    body = "x" * 300
    records = [rec([], 0.0, 1.0, status="error", error_class="http_status", request_id=i)
               for i in range(3)]
    records = [dataclasses.replace(r, error_detail=f"HTTP 503: {body}") for r in records]
    records.append(rec([], 0.0, 1.0, status="error", error_class="malformed_chunk",
                       request_id=9))
    said = failed_requests(point(records))
    assert said is not None
    assert said.endswith(f"the server said HTTP 503: {'x' * 120}")


def test_a_window_without_requests_after_a_failed_warmup_is_not_a_measurement() -> None:
    assert failed_requests(point([], warmup=(6, 6))) is not None
    assert failed_requests(point([], warmup=(6, 5))) is None


def test_no_token_in_the_window_is_not_a_measurement() -> None:
    # A server that accepts requests and never answers: cut at the window's end, or timed out.
    silent = [rec([], 0.0, 2.0, status="cancelled", request_id=0),
              rec([], 0.0, 2.0, status="error", error_class="timeout", request_id=1)]
    said = failed_requests(point(silent))
    assert said is not None and said.startswith("the server sent no token to any of 2 requests")
    # A slow server whose streams were flowing when the window cut them is measured.
    flowing = [rec([(1.0, 3)], 0.0, 2.0, status="cancelled", request_id=i) for i in range(2)]
    assert failed_requests(point(flowing)) is None
