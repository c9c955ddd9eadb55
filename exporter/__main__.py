"""`python -m exporter` runs the command line."""

from exporter.cli import main

main()
