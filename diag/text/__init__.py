"""Text every stage prints the same way: units, rank ranges, terminal- and Markdown-safe values.

Imported by the verdict (its sentences), the renderer (its tables) and the commands (what they
print), so one byte count or one rank set reads identically in the summary line, the HTML
table and the Markdown ticket. May import only the standard library and ``diag.model``.
"""
