# Sourced by the scripts that pin figures the emulation counts
# (cuda-step-costs.sh, cuda-traffic.sh): their command line and their
# print, --write and --check. Not run by itself.
#
#   pinned_options NAME HELP_LINES "$@"   sets mode (print|write|check), file
#                                         and bin (default build/bin), and
#                                         checks that collc and collrun are there
#   pinned_finish NAME OUTPUT WHAT        prints OUTPUT, records it in $file, or
#                                         compares it with $file (diff -u; exit 1
#                                         on any difference, better or worse)

pinned_options() {
  local name=$1 help=$2
  shift 2
  mode=print file= bin=$root/build/bin
  while [ $# -gt 0 ]; do
    case $1 in
    --write | --check)
      mode=${1#--}
      [ $# -ge 2 ] || { echo "$name: $1 needs a file" >&2; exit 2; }
      file=$2
      shift 2
      ;;
    --bin)
      [ $# -ge 2 ] || { echo "$name: --bin needs a directory" >&2; exit 2; }
      bin=$2
      shift 2
      ;;
    -h | --help) sed -n "2,${help}p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "$name: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
  done
  local tool
  for tool in collc collrun; do
    [ -x "$bin/$tool" ] || { echo "$name: no $bin/$tool (build it, or pass --bin DIR)" >&2; exit 2; }
  done
}

# WHAT names the figures in the messages ("the step costs", "the counts").
pinned_finish() {
  local name=$1 output=$2 what=$3
  case $mode in
  print) cat "$output" ;;
  write)
    cp "$output" "$file"
    echo "$name: recorded $file"
    ;;
  check)
    [ -r "$file" ] || { echo "$name: cannot read $file" >&2; exit 2; }
    if ! diff -u "$file" "$output"; then
      echo "$name: $what differ from $file (above: - recorded, + now)." >&2
      echo "  More: a regression to fix. Fewer, on purpose: record them with" >&2
      echo "  scripts/$name.sh --write $file, and say why in the commit." >&2
      exit 1
    fi
    echo "$name: $what match $file"
    ;;
  esac
}
