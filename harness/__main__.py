"""`python -m harness COMMAND`: env, repro, merge, list, bench."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    commands = {"env": _env, "repro": _repro, "merge": _merge, "list": _list, "bench": _bench}
    if not args or args[0] in ("-h", "--help") or args[0] not in commands:
        print("usage: python -m harness {env|list|repro|merge|bench} ...\n"
              "  env     GPUs (NVML), driver, compute-sanitizer, package versions\n"
              "  list    scenarios and their case ids\n"
              "  repro   run one case and print where it goes out of bounds\n"
              "  merge   combine report.json files from several runners into one matrix\n"
              "  bench   time every mode on the GPU", file=sys.stderr)
        return 0 if args and args[0] in ("-h", "--help") else 2
    return commands[args[0]](args[1:])


def _env(args: list[str]) -> int:
    from harness.env import discover, environment
    disc = discover()
    env = environment(disc)
    print(f"GPUs: {disc.summary}")
    for g in env["gpus"]:
        print(f"  [{g['index']}] {g['name']}  uuid={g['uuid']}  compute capability {g['capability'][0]}.{g['capability'][1]}  arch {g['arch']}  {g['memory_mib']} MiB")
    print(f"driver: {env['driver'] or 'none'}")
    cs = env["compute_sanitizer"]
    if cs.get("path"):
        print(f"compute-sanitizer: {cs['path']} (version {cs['version']}, found via {cs['source']})")
    else:
        print(f"compute-sanitizer: not found (searched: {', '.join(cs['searched']) or 'nothing'})")
    for name in ("torch", "triton", "triton_kernels", "nvidia-ml-py"):
        print(f"{name}: {env[name]}")
    return 0


def _list(args: list[str]) -> int:
    from harness.registry import all_scenarios
    for name, scenario in all_scenarios().items():
        print(f"{name}: {scenario.summary}")
        for case in scenario.build():
            print(f"  {case.id}  [{', '.join(case.tags)}]")
    return 0


def _repro(args: list[str]) -> int:
    from harness.repro import main
    return main(args)


def _merge(args: list[str]) -> int:
    from harness.merge import main
    return main(args)


def _bench(args: list[str]) -> int:
    from harness.bench import main
    return main(args)


if __name__ == "__main__":
    sys.exit(main())
