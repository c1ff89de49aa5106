#!/usr/bin/env bash
# Run here (not on the device), before ci/gpu/hostsuite_check.sh: puts what it carries into .vendor/ (ignored):
#   .vendor/sgl-kernel-0.3.21/triton_kernels      triton_kernels copy A, as `make triton-kernels` unpacks it
#   .vendor/triton-kernels-tests-d4399a15/tests   triton_kernels' own tests at triton-lang/triton
#       d4399a15c2468e0c349c1ae4e0ea53ab14bc5226 ("[triton_kernels] minor rename (#8044)", 2025-09-02): the commit
#       whose python/triton_kernels/triton_kernels/ equals copy A file for file (all 40 files by git blob id; the
#       wheel leaves out roofline.py), so these are the tests of the code the device runs. Nothing of ours in them.
# TRITON_GIT: a clone or mirror of triton-lang/triton holding that commit (no network is needed when it is local).
# Every test file is checked against its blob id at that commit before it is kept. Idempotent.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
COMMIT=d4399a15c2468e0c349c1ae4e0ea53ab14bc5226
DEST="$REPO/.vendor/triton-kernels-tests-d4399a15"
TRITON_GIT=${TRITON_GIT:?set TRITON_GIT to a git clone or mirror of triton-lang/triton}
# path under python/triton_kernels/tests -> git blob id at $COMMIT
BLOBS="__init__.py e69de29bb2d1d6434b8b29ae775ad8c2e48c5391
conftest.py 177bd34d0a60d78b77e4026d7f17c0cc00da9d8a
test_compaction.py 4e6c31e4278f1be76e27fda8444f6663f2f84ce5
test_matmul.py 8ca1bdf21eeb327f72ac8e9a5a9b3751f7c3a325
test_mxfp.py e16666761e8724106199950cb460b9e624085c33
test_routing.py 60bb35d26c4d0a7fcac139d2ab7f2203cd55317f
test_specialize.py 8d2b9a41578cffbd315b28cc0ce9cdad9c712b0a
test_swiglu.py b3ab353774548954f09c9e8e7aef373755fa362a
test_tensor.py 5f9d0f9d2eaa6853759cd6e91e6189fb139dd995
test_tensor_details/test_layout_blackwell.py 084b7005c01dd7c55c475419a28bc293b9a41f53
test_tensor_details/test_layout_hopper.py e9edac5fbf11fc69634ebe4c0b0e21e30d812689"

(cd "$REPO" && "${PYTHON:-.venv/bin/python}" -m gpu_memsafety upstream --only tk-A --no-tvm-ffi --all)
tmp=$(mktemp -d); trap 'rm -rf -- "$tmp"' EXIT
git -C "$TRITON_GIT" archive "$COMMIT" python/triton_kernels/tests | tar -x -C "$tmp"
while read -r path blob; do
  got=$(git hash-object "$tmp/python/triton_kernels/tests/$path")
  [ "$got" = "$blob" ] || { echo "$path: blob $got, expected $blob at $COMMIT" >&2; exit 1; }
done <<< "$BLOBS"
rm -rf "$DEST"; mkdir -p "$DEST"; mv "$tmp/python/triton_kernels/tests" "$DEST/tests"; rm -rf "$tmp"
printf 'triton-lang/triton %s python/triton_kernels/tests\n%s\n' "$COMMIT" "$BLOBS" > "$DEST/.complete"
ls "$REPO/.vendor/sgl-kernel-0.3.21/triton_kernels" | head -3; find "$DEST" -name '*.py' | wc -l
