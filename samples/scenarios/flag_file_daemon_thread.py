"""idle: ``flag_file_daemon``'s loop in a thread - the main thread starts it and waits in
``Thread.join``; the poller checks for the flag file every second, logs ``alive tick=N`` and
sleeps. The join waits for a live thread, the one that wakes: nothing waits on what no timer
ends. It read "deadlocked: ... kill it"."""

from __future__ import annotations

from flag_file_daemon import main

if __name__ == "__main__":
    main(thread=True)
