"""A scripted model connection that writes down every call it answers, and can crash the job.

:class:`WitnessedScripted` plays its turns like :class:`ScriptedChatModelConnection` and appends
``[connection name, question, time]`` to ``$WITNESSED_MODELS`` (when set) for each call it
answers: a completed call that a replay sent again shows up twice. With ``$WITNESSED_CRASH`` set
to ``<name>:<n>:<flag file>``, the ``n``-th call of connection ``name`` crashes the job once, its
reply lost (a ``KillPointReached``, like a process death), and writes the time into the flag file.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from flink_agents.api import ResourceDeclaration
from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.durable.faults import KillPoint, KillPointReached
from flink_agents.providers import ScriptedChatModelConnection

WITNESS_ENV = "WITNESSED_MODELS"
CRASH_ENV = "WITNESSED_CRASH"


class WitnessedScripted(ScriptedChatModelConnection):
    """A scripted connection whose answered calls are written down (see the module)."""

    async def chat(self, request: ChatRequest) -> ChatMessage:
        reply = await super().chat(request)
        path = os.environ.get(WITNESS_ENV)
        if path:
            question = request.messages[-1].content if request.messages else ""
            with open(path, "a") as file:
                file.write(json.dumps([self.name, question, time.time()]) + "\n")
            self._crash_if_asked(Path(path))
        return reply

    def _crash_if_asked(self, witness: Path) -> None:
        crash = os.environ.get(CRASH_ENV)
        if not crash:
            return
        name, at, flag = crash.split(":", 2)
        if name != self.name or Path(flag).exists():
            return
        calls = sum(1 for line in witness.read_text().splitlines() if json.loads(line)[0] == name)
        if calls >= int(at):
            Path(flag).write_text(str(time.time()))
            raise KillPointReached(KillPoint.AFTER_REPLY_BEFORE_RECORD, calls)


def witnessed(name: str, turns: list[dict[str, Any]]) -> ResourceDeclaration:
    """The ``llm`` connection of an example's stage, witnessed, under the counters' ``name``."""
    return ResourceDeclaration.connection("llm", WitnessedScripted, name=name, turns=turns)


def witnessed_calls(path: Path) -> list[list[Any]]:
    """The calls written down in ``path``: ``[connection name, question, time]`` each."""
    return [json.loads(line) for line in path.read_text().splitlines()]
