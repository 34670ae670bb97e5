#!/bin/sh
# The instruction-set files (*avx*) must not define symbols the linker could share with the rest of
# the program: an inline or template copy compiled for AVX-512 that the linker picked for everyone
# would crash an AVX2-only machine. Fails on any weak (W/V) or unique (u) symbol in their objects,
# except DW.ref.__gxx_personality_v0: a pointer to the C++ runtime's exception personality routine
# (data, no code of ours) that sanitizer builds emit with the unwind tables.
# Usage: check_isa_objects.sh OBJECT...
n=0
for o in "$@"; do
  case "$o" in
    *avx*)
      n=$((n + 1))
      syms=$(nm "$o") || { echo "nm failed on $o"; exit 1; }
      if echo "$syms" | grep -E ' [WVu] ' | grep -v ' DW\.ref\.__gxx_personality_v0$'; then
        echo "$o defines shared symbols"
        exit 1
      fi
      ;;
  esac
done
if [ "$n" -lt 3 ]; then
  echo "expected the AVX objects among the arguments, found $n"
  exit 1
fi
echo "ok: $n instruction-set objects define no shared symbols"
