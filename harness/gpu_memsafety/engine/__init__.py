"""The engine: the mode table, the job records that cross the process boundary, the runner (parent) and the worker (child)."""
