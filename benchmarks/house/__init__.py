"""Figures about the code itself (modules, lines, import cycles)."""
