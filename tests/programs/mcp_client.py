"""An MCP client that goes away mid-capture: the official SDK's stdio client, as an agent runs it.

``mcp_client.py OUT_DIR PID MODE``: starts ``diag mcp --out-dir OUT_DIR``, lists the tools,
prints ``READY`` and asks for a capture of PID (1 s x 20 samples). MODE ``leave``: gives up on
the answer after 3 s and closes the session the SDK's way (stdin closed, then SIGTERM to the
server). MODE ``hang``: waits for the answer until the test kills this process (SIGKILL: the
server sees only its stdin end).
"""

from __future__ import annotations

import sys

import anyio
from mcp import Client, StdioServerParameters


async def main(out_dir: str, pid: int, mode: str) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "diag", "mcp", "--out-dir", out_dir]
    )
    async with Client(params) as client:
        await client.list_tools()
        print("READY", flush=True)
        args = {"pid": pid, "interval_s": 1.0, "count": 20}
        with anyio.move_on_after(3.0 if mode == "leave" else 3600.0):
            await client.call_tool("capture", args)
    print("LEFT", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[2]), sys.argv[3])
