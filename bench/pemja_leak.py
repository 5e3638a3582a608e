"""What each closed pemja interpreter leaves in the process (issue 37), outside Flink.

In thread mode every embedded Python operator of every attempt opens a pemja interpreter (a
thread state of the one CPython in the TaskManager) and closes it when the attempt ends. This
closes ``--interpreters`` of them, opened from Java the same way (``PythonInterpreter``,
``MULTI_THREAD``, one Java object with an overloaded method set into each, then ``close()``),
and counts, from one more, what no closed interpreter should keep: lists of ``PyJMethod``s
(the overloads pemja's method wrappers hold), ``_pemja`` module objects, and pymalloc blocks.

    .venv/bin/python -m bench.pemja_leak --interpreters 200 [--wide] [--release]

Needs ``javac`` and ``java`` (the JDK the cluster runs on); the classes are built against the
``flink-python`` jar PyFlink ships, which holds pemja's Java side.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path

import pyflink

from bench.restart_rss import slope

SOURCE = Path(__file__).with_name("pemja_leak") / "PemjaInterpreterLeak.java"
ROOT = Path(__file__).resolve().parents[1]


def flink_python_jar() -> Path:
    jars = sorted((Path(pyflink.__file__).parent / "opt").glob("flink-python-*.jar"))
    if not jars:
        raise SystemExit("no flink-python jar in PyFlink's opt/ folder")
    return jars[-1]


RELEASE = (
    "from flink_agents.flink.pemja_references import release_pemja_references\n"
    "release_pemja_references()"
)
"""What ``--release`` runs in each interpreter before it closes, as the agent operator does."""


def run(
    interpreters: int, every: int, *, wide: bool = False, release: bool = False
) -> list[dict[str, int]]:
    """One sample per ``every`` closed interpreters, from the first one on; ``wide``: the Java
    object set into each has 11 overloaded methods, not 1; ``release``: each runs
    :func:`~flink_agents.flink.pemja_references.release_pemja_references` first."""
    for tool in ("javac", "java"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found: this diagnostic needs a JDK")
    jar = str(flink_python_jar())
    with tempfile.TemporaryDirectory() as classes:
        subprocess.run(["javac", "-cp", jar, "-d", classes, str(SOURCE)], check=True)
        command = [
            "java", "-cp", f"{jar}:{classes}", "PemjaInterpreterLeak",
            sys.executable, os.pathsep.join([site.getsitepackages()[0], str(ROOT)]),
            str(interpreters), str(every), "wide" if wide else "narrow",
            *([RELEASE] if release else []),
        ]  # fmt: skip
        done = subprocess.run(
            command,
            check=True,
            stdout=subprocess.PIPE,  # the samples; Java's errors go to this run's stderr
            text=True,
            timeout=600,
        )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interpreters", type=int, default=200)
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument(
        "--wide",
        action="store_true",
        help="set an object with 11 overloaded methods into each interpreter, not 1: the "
        "difference per interpreter is what 10 more multi-methods keep",
    )
    parser.add_argument(
        "--release",
        action="store_true",
        help="run flink_agents' release_pemja_references in each interpreter before it closes",
    )
    args = parser.parse_args(argv)
    samples = run(args.interpreters, args.every, wide=args.wide, release=args.release)
    print("closed  PyJMethod lists  _pemja modules  pymalloc blocks")
    for sample in samples:
        print(
            f"{sample['closed']:6}  {sample['method_lists']:15}  {sample['pemja_modules']:14}  "
            f"{sample['blocks']:15}"
        )
    # From the second sample: with --release the first one precedes flink_agents' import.
    for figure in ("method_lists", "pemja_modules", "blocks"):
        per = slope([(sample["closed"], sample[figure]) for sample in samples[1:]])
        print(f"{figure} per closed interpreter: {per:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
