"""The leaves every stage shares: errors and exit codes, time, the data directory's layout, the
model (`Outcome`, `Chunk`, `OpenOp`, ...) and the table declarations. Imports nothing else of opsaudit.
"""
