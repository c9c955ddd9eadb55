"""A local data directory: Hive-partitioned Parquet beside its SQLite state (`dataset.Dataset`),
and the small tables and the views database exported after each run (`exports`).
"""
