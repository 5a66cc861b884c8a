"""Programs whose arguments carry credentials, and where: data for the argv rules
(``diag.redaction.argv``) and the free-text patterns of the same command lines
(``diag.redaction.patterns``), which both read it - a new tool is one line here.
"""

from __future__ import annotations

# Tools whose short option carries a password, and which option: ``mysql -pPW``/``-p PW``,
# ``redis-cli -a PW``, ``sshpass -p PW``, ``docker login -p PW``. Not psql, whose -p is a port.
PASSWORD_SHORT_OPTIONS = {
    "mysql": "-p",
    "mysqldump": "-p",
    "mysqladmin": "-p",
    "mysqlimport": "-p",
    "mysqlshow": "-p",
    "mysqlcheck": "-p",
    "mysqlsh": "-p",
    "mariadb": "-p",
    "mariadb-dump": "-p",
    "mongo": "-p",
    "mongosh": "-p",
    "mongodump": "-p",
    "mongorestore": "-p",
    "mongoexport": "-p",
    "mongoimport": "-p",
    "sshpass": "-p",
    "redis-cli": "-a",
    "zip": "-P",
    "unzip": "-P",
    "7z": "-p",
    "7za": "-p",
    "docker login": "-p",
    "podman login": "-p",
    "nerdctl login": "-p",
}
# Commands whose positional argument is a credential: ``wandb login KEY``.
POSITIONAL_SECRET_COMMANDS = ("wandb login",)
# Options whose value is ``user:password`` (curl, wget, git's http helpers).
USER_PASSWORD_OPTIONS = frozenset({"-u", "--user", "--proxy-user", "-U", "--http-user"})
USER_PASSWORD_TOOLS = frozenset({"curl", "wget"})
