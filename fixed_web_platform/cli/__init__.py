"""Command line: main.py dispatches to one module per subcommand (run, capabilities, report,
compare)."""
