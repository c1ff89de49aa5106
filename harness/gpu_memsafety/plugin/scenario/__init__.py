"""A scenario run under pytest (registered by the face, fixtures/scenario_run.py): `discovery` (the scenarios it
sees; its options are validated in plugin/settings.py), `run` (configure, plan batches, run them, gather, report), `controller` (one result
per case), `shards`, `xdist_sched`."""
