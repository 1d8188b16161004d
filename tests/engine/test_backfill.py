"""A sync's embedding wait: BoundedEmbedding returns past its wait, the run goes on."""

from __future__ import annotations

import threading
from collections.abc import Callable

from memmw.engine.backfill import BackfillReport, BoundedEmbedding


def test_a_run_that_finishes_in_time_gives_its_report() -> None:
    seen: list[tuple[int, int]] = []

    def embed(progress: Callable[[int, int], None]) -> BackfillReport:
        progress(3, 3)
        return BackfillReport(embedded=3)

    run = BoundedEmbedding(embed, wait_s=30, progress=lambda d, t: seen.append((d, t)))
    report, warning = run.wait()
    assert report is not None and report.embedded == 3 and warning is None
    assert seen == [(3, 3)] and not run.stalled


def test_a_run_that_stopped_with_chunks_left_says_so() -> None:
    run = BoundedEmbedding(
        lambda _p: BackfillReport(error="ProviderError: quota", remaining=4), wait_s=30
    )
    _report, warning = run.wait()
    assert warning is not None and "4 chunks stay keyword-only" in warning


def test_a_hung_run_is_not_waited_for_and_goes_on() -> None:
    release = threading.Event()
    finished = threading.Event()

    def embed(progress: Callable[[int, int], None]) -> BackfillReport:
        release.wait(30)
        progress(1, 1)
        finished.set()
        return BackfillReport(embedded=1)

    run = BoundedEmbedding(embed, wait_s=0.05)
    report, warning = run.wait()
    assert run.thread.is_alive() and not finished.is_set()
    assert run.stalled and report is not None and report.embedded == 0
    assert warning is not None and "remote.sync_wait_s" in warning
    release.set()
    assert finished.wait(10)  # the run went on in the background
    run.thread.join(10)


def test_a_run_that_made_progress_is_not_stalled() -> None:
    release = threading.Event()
    reported = threading.Event()

    def embed(progress: Callable[[int, int], None]) -> BackfillReport:
        progress(32, 64)
        reported.set()
        release.wait(30)
        return BackfillReport(embedded=64)

    run = BoundedEmbedding(embed, wait_s=0.05)
    assert reported.wait(10)
    report, _warning = run.wait()
    assert not run.stalled and report is not None and report.embedded == 32
    release.set()
    run.thread.join(10)
