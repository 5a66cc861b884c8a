"""The redactor's rules beyond names and key/value pairs (base layer: standard library only).

``argv``: which arguments of a command line hold a secret; ``structure``: secrets found by
the structure that holds them (argv rendered as Python/JSON/YAML lists, netrc lines);
``shapes``: token formats, credentials inside URLs, webhook URLs; ``tools``: which programs'
options carry a password; ``stream``: where a line written in pieces may be cut.
``diag.redact`` applies them, after the values it learned and before the patterns of
``diag.secret_patterns``.
"""
