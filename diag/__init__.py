"""diag: is this ML run progressing, slow, idle, or deadlocked - and why?"""

__version__ = "0.1.0"
