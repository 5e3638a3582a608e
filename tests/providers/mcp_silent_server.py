"""A stdio "MCP server" for the fault tests: it logs its pid, then reads its stdin and never
answers (not even ``initialize``), and stays alive after its stdin closes, so only a kill ends
it.

``python mcp_silent_server.py PIDS [SILENCE]``: PIDS is a file each process appends its pid to
(and whether it serves).
With SILENCE (a path), a process started while no file SILENCE exists serves the real test
server (tests/providers/mcp_servers) instead, so a test can make a server's restart silent.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def main(pids: Path, silence: Path | None) -> None:
    serving = silence is not None and not silence.exists()
    with pids.open("a") as out:
        out.write(f"{os.getpid()} {'serving' if serving else 'silent'}\n")
    if serving:
        from mcp_servers import server  # this script's directory is on sys.path

        server.run("stdio")
        return
    sys.stdin.buffer.read()  # every request, unanswered, until the client closes stdin
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
