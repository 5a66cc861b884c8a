"""``diag mcp``: diag as a Model Context Protocol server over stdio, for coding agents.

The agent at the keyboard at 3 a.m. needs the same answers an engineer does - which jobs are
there, what is each doing, what did a running watch last see - as tool calls with JSON answers,
and with the warnings an engineer already knows (a silent log proves nothing). ``server`` holds
the tools; each runs diag's own commands (``diag.commands``) in a child process under a
deadline, so a slow capture or a huge journal cannot hang the session. May import every stage
up to ``watch``; only ``diag.cli`` imports it.
"""
