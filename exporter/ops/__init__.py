"""Operating a dataset: `status`, `check`, the metrics file (`metrics`) and `doctor`."""
