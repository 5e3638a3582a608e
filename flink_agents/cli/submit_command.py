"""``flink-agents submit JOB.yaml --jobmanager HOST:PORT [--from-savepoint P] [--parallelism N]``:
a job spec to a standalone cluster, with ``flink run -py``."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from flink_agents.cli.conventions import EXIT_USAGE
from flink_agents.cli.run_command import job_report


def add_command(commands: Any) -> None:
    """Add ``submit`` to the ``flink-agents`` subcommands."""
    parser = commands.add_parser("submit", help="submit a job spec to a Flink cluster")
    parser.add_argument("job", help="a job spec (jobs/*.yaml)")
    parser.add_argument(
        "--jobmanager", default="127.0.0.1:8081", help="REST address of the JobManager"
    )
    parser.add_argument("--detached", action="store_true", help="return once submitted")
    parser.add_argument(
        "--from-savepoint",
        metavar="PATH",
        help="start from this savepoint or retained checkpoint (restores the action-state store)",
    )
    parser.add_argument(
        "--parallelism", type=int, help="instead of the spec's (up to its max_parallelism)"
    )
    parser.set_defaults(handler=cmd_submit)


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit a job spec to a standalone cluster with `flink run -py`."""
    import subprocess

    from flink_agents.flink.job import load_job
    from flink_agents.flink.job_runner import shipped_outputs, submit_command, with_overrides

    # A bad spec (or parallelism) fails here, with file and line, not on the cluster.
    spec = with_overrides(
        load_job(args.job),
        parallelism=args.parallelism,
        from_savepoint=args.from_savepoint is not None,
    )
    if spec.store is not None:
        spec.store.require_secret()  # the job's client process needs it too
    for warning in shipped_outputs(spec, args.job):
        print(f"flink-agents submit: warning: {warning}", file=sys.stderr)
    unreachable = _unreachable(args.jobmanager)
    if unreachable:
        print(
            f"flink-agents submit: no JobManager answers at {args.jobmanager} ({unreachable}); "
            "start the cluster (scripts/flink-cluster.sh start) or give --jobmanager HOST:PORT",
            file=sys.stderr,
        )
        return EXIT_USAGE
    command = submit_command(
        args.job,
        args.jobmanager,
        detached=args.detached,
        from_savepoint=args.from_savepoint,
        parallelism=args.parallelism,
    )
    flink_run = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert flink_run.stdout is not None
    job_id = None
    for line in flink_run.stdout:  # passed on as it comes; the job's id is read on the way
        sys.stdout.write(line)
        sys.stdout.flush()
        found = _SUBMITTED.search(line)
        job_id = found.group(1) if found else job_id
    code = flink_run.wait()
    if args.detached or job_id is None:
        return code
    return _cluster_job_report(args.jobmanager, job_id, spec.name, code)


_SUBMITTED = re.compile(r"JobID ([0-9a-f]{32})")
"""How `flink run` names the job it submitted."""


def _cluster_job_report(jobmanager: str, job_id: str, name: str, code: int) -> int:
    """After an attached `flink run` returned ``code``: the job's failures from the cluster's
    REST API (it keeps finished jobs), reported as `run` reports a local job's."""
    from flink_agents.flink.job_status import JobMetricsReader

    address = jobmanager if "://" in jobmanager else f"http://{jobmanager}"
    failures = JobMetricsReader(address, job_id).read_failures() or []
    # `flink run` printed the final failure's stack trace already.
    report = job_report("submit", name, failures, None if code == 0 else "see above")
    return code or report


def _unreachable(address: str) -> str | None:
    """Why nothing accepts a connection at ``HOST:PORT``, or None when something does: `flink
    run` would otherwise retry for a while and end in a page of Java stack traces."""
    import socket

    host, _, port = address.split("://")[-1].split("/")[0].rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=5):
            return None
    except ValueError:
        return f"{port!r} is not a port"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
