#!/usr/bin/env bash
# Fails when an edge includes a header of the library that is not public.
# The edges sit above the engine and use only its public API (STYLE.md,
# "Edges use the front door"): server/, speechd/, python/src/ (the
# binding), examples/, cli/ and audio-io/. The public headers are the ones
# docs/Doxyfile's INPUT names (the API reference documents exactly those),
# so the list lives in one place. An include of rt/, dsp/, gpu/ or engine/
# that is not in it fails. tests/scripts/public_includes_test.sh proves that
# it can (style.public_includes_can_fail).
# Run by ctest (style.public_includes) and by every build (target
# public_includes_check).
set -euo pipefail
cd "$(dirname "$0")/.."

edges=(server speechd python/src examples cli audio-io)

# INPUT = a \ b \ ... : the headers among them.
mapfile -t public < <(awk '/^INPUT[[:space:]]*=/ {on = 1} on {
        for (i = 1; i <= NF; i++) if ($i ~ /\.h$/) print $i
        if ($NF != "\\") on = 0 }' docs/Doxyfile)
if [ ${#public[@]} -eq 0 ]; then
    echo "no public headers found in docs/Doxyfile's INPUT"
    exit 1
fi
is_public() {
    local h
    for h in "${public[@]}"; do [ "$h" = "$1" ] && return 0; done
    return 1
}

bad=()
while IFS= read -r file; do
    while IFS= read -r header; do
        is_public "$header" && continue
        bad+=("$file includes $header")
    done < <(sed -nE 's,^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]((rt|dsp|gpu|engine)/[^">]+)[">].*,\1,p' "$file")
done < <(find "${edges[@]}" -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.c' -o -name '*.cpp' -o -name '*.cc' -o -name '*.cu' \) | sort)

if [ ${#bad[@]} -gt 0 ]; then
    echo "edges including headers that are not public (public: ${public[*]}; see docs/Doxyfile):"
    printf '  %s\n' "${bad[@]}"
    exit 1
fi
echo "edges (${edges[*]}) include only public headers: ${public[*]}"
