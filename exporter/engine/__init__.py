"""The sync: per-project walks newest-first to the checkpoint (`walk`), the rows they yield
(`records`), when to refresh open operations (`schedule`), budgets (`budget`), and the engine that
commits the walks through a store (`sync`).
"""
