"""write_json_atomic under two writers: two sweeps sharing an output folder both rewrite sweep.json."""
from __future__ import annotations

import json
import multiprocessing

from cselab.train.checkpoint import write_json_atomic


def _write_many(path, writer: int, times: int, errors) -> None:
    try:
        for i in range(times):
            write_json_atomic(path, {"writer": writer, "i": i, "padding": "x" * 4096})
    except OSError as error:  # a temporary file renamed away by the other writer
        errors.put(f"{type(error).__name__}: {error}")


def test_two_processes_rewriting_one_file_never_fail_and_leave_whole_json(tmp_path):
    path = tmp_path / "sweep.json"
    context = multiprocessing.get_context("fork")
    errors = context.Queue()
    writers = [context.Process(target=_write_many, args=(path, writer, 400, errors)) for writer in (0, 1)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=120)
    reported = [errors.get() for _ in range(errors.qsize())] if not errors.empty() else []
    assert reported == [] and all(process.exitcode == 0 for process in writers)
    assert json.loads(path.read_text())["i"] == 399
    assert [p.name for p in tmp_path.iterdir()] == ["sweep.json"]  # no temporary file left behind


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "summary.json"
    write_json_atomic(path, {"finished": True})
    try:
        write_json_atomic(path, {"finished": object()})  # not JSON: fails before the rename
    except TypeError:
        pass
    assert json.loads(path.read_text()) == {"finished": True}
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]
