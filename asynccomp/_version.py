"""The version of asynccomp (one place; pyproject.toml says the same, a test checks)."""

__version__ = "0.1.0"
