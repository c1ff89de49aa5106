# Sourced first by every device script (ci/gpu/*.sh, ci/gpu/field/*.sh): what a script reads from its environment,
# read safely, and a run folder of its own for each call.
#   whole NAME DEFAULT LOW HIGH  NAME from the environment (DEFAULT when unset or empty): decimal digits, LOW..HIGH;
#                                anything else ends the script (exit 2) before it runs anything. Bash evaluates a
#                                variable's value as an expression inside $(( )), (( )) and [[ -lt ]]
#                                (`BUDGET='0*T_START[$(touch F)]'` runs touch), so no raw value may reach one.
#   fresh_run_folder NAME        R=$TMPDIR/NAME.XXXXXX (/tmp), new for this call (a warm machine's earlier call never shows in
#                                it), removed when the script exits, on SIGTERM/SIGINT/SIGHUP too
#   on_exit COMMAND              run COMMAND when the script exits (every exit trap of a script goes through it)
#   fresh_file PATH...           empty these output files (a second call with the same OUT reports only its own)

# Sourced once (steps.sh sources it too): an array is never imported from the environment, so this tells.
[[ $(declare -p _RUNENV_ON_EXIT 2>/dev/null) == "declare -a"* ]] && return 0

whole() {
  local name=$1 default=$2 low=$3 high=$4 value
  value=${!name:-$default}
  if [[ ! $value =~ ^[0-9]{1,9}$ ]]; then
    echo "${0##*/}: $name must be a whole number from $low to $high (decimal digits only): refused, nothing run" >&2
    exit 2
  fi
  value=$((10#$value))
  if (( value < low || value > high )); then
    echo "${0##*/}: $name=$value is outside $low..$high: refused, nothing run" >&2
    exit 2
  fi
  printf -v "$name" '%d' "$value"
}

_RUNENV_ON_EXIT=()
_runenv_exit() {
  local command
  for command in "${_RUNENV_ON_EXIT[@]}"; do eval "$command"; done
}
on_exit() {
  _RUNENV_ON_EXIT+=("$1")
  trap _runenv_exit EXIT
  trap 'exit 143' TERM; trap 'exit 130' INT; trap 'exit 129' HUP     # so that the exit trap runs on these too
}

fresh_run_folder() {
  R=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || { echo "${0##*/}: cannot make a run folder in ${TMPDIR:-/tmp}" >&2; exit 1; }
  on_exit 'rm -rf -- "$R"'
}

fresh_file() {
  local path
  for path in "$@"; do mkdir -p "$(dirname "$path")" && : > "$path"; done
}
