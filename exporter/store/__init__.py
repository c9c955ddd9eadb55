"""Storage: the writer interface the sync commits through (`base.Store`), the SQLite state
(`state`), a local directory of Hive Parquet (`local/`) and Delta tables on object storage
(`lake/`). `opener.open_store()` (writers) and `readers` (readers) are the only places that name
both kinds.
"""
