"""Placeholder: filled in by its issue."""

COMMANDS: list = []
