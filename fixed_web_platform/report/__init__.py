"""Report: at a glance (glance.py), tables and HTML (render.py), plots (plots.py), the one
Markdown table writer (markdown.py), the report seen in a browser (screenshot.py)."""
