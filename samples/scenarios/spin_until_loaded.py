"""progressing or slow: the contrast of ``spin_on_dead_loader`` - the vocabulary is there, its
loader thread slow to read it; the main thread's spin ends during the capture."""

from __future__ import annotations

from spin_on_dead_loader import run

if __name__ == "__main__":
    run(vocab_ok=True)
