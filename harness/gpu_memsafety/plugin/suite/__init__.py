"""A guarded test suite (`pytest --gpu-memsafety[=MODE]`, started by the face, fixtures/plugin.py): `runtime` (this
process's role (its options validated in plugin/settings.py), the allocator installed, the controller's reports), `roles` (the
plugins that play each role), `inprocess`, `batches` and `child` (where the tests run), `common`, `explore` and
`explore_items` (each test again at the shapes it forgot)."""
