"""What the soak's faults read from a Flink job and do to its checkpoint folder, apart from the
REST calls (so each piece can be checked on made-up answers).

* A job's tasks are being deployed, or restoring their state, when some vertex counts tasks in
  ``DEPLOYING`` or ``INITIALIZING`` (``GET /jobs/<id>``): :func:`restoring_state`.
* Checkpoints fail while a plain file stands where the JobManager would create the next
  checkpoints' folders (``<checkpoint dir>/<job id>/chk-<n>``): the folder cannot be created,
  whoever the cluster runs as (a folder without write permission stops no one running as root):
  :func:`block_checkpoints`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: The task states of a job coming back after a failure: deployed to a TaskManager, then
#: restoring its state (``INITIALIZING``) before it runs.
RESTORING = ("INITIALIZING", "DEPLOYING")


def restoring_state(job: dict[str, Any]) -> str | None:
    """``INITIALIZING`` or ``DEPLOYING`` when some task of ``job`` (the body of ``GET
    /jobs/<id>``) is in that state (``INITIALIZING`` first), else None."""
    for state in RESTORING:
        if any(vertex["tasks"].get(state, 0) for vertex in job["vertices"]):
            return state
    return None


def next_checkpoint_id(history: Sequence[dict[str, Any]]) -> int:
    """The id the next checkpoint gets at the earliest: one past the highest of the checkpoint
    history (``GET /jobs/<id>/checkpoints``), 1 when there is none."""
    return max((int(entry["id"]) for entry in history), default=0) + 1


def restart_count(metrics: Sequence[dict[str, Any]]) -> int | None:
    """``numRestarts`` of ``GET /jobs/<id>/metrics?get=numRestarts`` (None when absent)."""
    values = [int(metric["value"]) for metric in metrics if metric["id"] == "numRestarts"]
    return values[0] if values else None


def block_checkpoints(folder: Path, first_id: int, count: int) -> list[Path]:
    """A file at ``folder/chk-<n>`` for ``count`` ids from ``first_id`` on, where nothing stands
    yet (a folder already there is a checkpoint triggered meanwhile: it may complete). Returns
    the files made, for :func:`unblock_checkpoints`."""
    made: list[Path] = []
    for n in range(first_id, first_id + count):
        path = folder / f"chk-{n}"
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        made.append(path)
    return made


def unblock_checkpoints(made: Sequence[Path]) -> None:
    """Remove the files :func:`block_checkpoints` made."""
    for path in made:
        path.unlink(missing_ok=True)
