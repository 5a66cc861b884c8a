"""The redactor, one package (base layer: standard library only): keep secrets out of
everything diag writes.

``redact``: the ``Redactor`` that learns values and scrubs text, bytes and files, and
``printable``; ``patterns``: what looks secret (names, flags, key/value pairs, the free-text
table); ``argv``: which arguments of a command line hold a secret; ``structure``: secrets found
by the structure that holds them (argv rendered as Python/JSON/YAML lists, netrc lines);
``shapes``: token formats, credentials inside URLs, webhook URLs; ``headers``: cookies and
auth headers; ``tools``: which programs' options carry a password; ``literals``: the learned
values' automaton; ``stream``: where a line written in pieces may be cut. ``redact`` applies
them: the values it learned, then the structures, then ``patterns`` and ``shapes``. Every
module here imports only its siblings, never back up.
"""
