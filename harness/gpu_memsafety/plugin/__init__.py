"""The pytest plugin's two run engines, behind the face in fixtures/ (gpu_memsafety.fixtures: hooks, options and the
fixtures users call).

- `scenario/`: a scenario run (`pytest scenarios`, `make sanitize`): its options validated once, batches planned,
  each batch run by the engine's runner, one result per case gathered by the controller, the reports written.
- `suite/`: a guarded test suite (`pytest --gpu-memsafety`): each process's role, the guard allocator installed,
  tests checked in this process or run in batches of child processes, each test's evidence assembled and judged,
  the reports written.
- `settings`: the one validator, every option and ini key of both runs checked once into a typed record.
- `face` (the names and records the face and the engines share: the command line's paths, explore's keys, what the
  `gpu_memsafety_guarded` fixture checked), `interrupts` and `run_summary` (both engines).

The face imports these modules; nothing here imports the face (docs/architecture.md, Layers).
"""
