"""Results: the row model (rows.py), writing a sweep's folder (writer.py), reading it back (reader.py)."""
