"""Reading a dataset: the SQL views (`views`), the report (`report`), its HTML page (`html`) and
the output formats (`format`). Imports nothing of the sync.
"""
