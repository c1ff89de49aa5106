"""A scenario run under pytest (registered by the face, fixtures/scenario_run.py): `config` (its options validated
once, the scenarios it sees), `run` (configure, plan batches, run them, gather, report), `controller` (one result
per case), `shards`, `xdist_sched`."""
