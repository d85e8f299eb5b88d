#!/usr/bin/env bash
# Fails when an edge includes a header of the library that is not public.
# The edges sit above the engine and use only its public API (STYLE.md,
# "Edges use the front door"): server/, speechd/, python/src/ (the
# binding), examples/, cli/ and audio-io/. The public headers are the ones
# docs/Doxyfile's INPUT names (the API reference documents exactly those),
# so the list lives in one place. An include of rt/, dsp/, gpu/ or engine/
# that is not in it fails, unless KNOWN below names that very file and
# header: what is left to move behind the public API, each with its reason.
# Run by ctest (style.public_includes) and by every build (target
# public_includes_check).
set -euo pipefail
cd "$(dirname "$0")/.."

edges=(server speechd python/src examples cli audio-io)

# Private includes not yet removed: "FILE HEADER".
# cli/: the command-line tool reads models, devices and Piper voices'
# files below the engine (etude info, devices, phonemize, vocode, bench,
# say's traces and phoneme-id input) and names the gpu/ registry; moving
# each behind a public header is issue 43's work left for cli/.
KNOWN="
cli/model_commands.cpp engine/models/lef_file.h
cli/vocode_command.cpp engine/fault_plan.h
cli/vocode_command.cpp gpu/registry.h
cli/vocode_command.cpp dsp/log_mel.h
cli/vocode_command.cpp dsp/resampler.h
cli/vocode_command.cpp engine/device_choice.h
cli/vocode_command.cpp engine/models/mel_vocoder_stream.h
cli/bench_command.cpp engine/flite_voice.h
cli/info_commands.cpp engine/flite_voice.h
"

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
found=""
while IFS= read -r file; do
    while IFS= read -r header; do
        is_public "$header" && continue
        if grep -qxF "$file $header" <<<"$KNOWN"; then
            found+="$file $header"$'\n'
            continue
        fi
        bad+=("$file includes $header")
    done < <(sed -nE 's,^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]((rt|dsp|gpu|engine)/[^">]+)[">].*,\1,p' "$file")
done < <(find "${edges[@]}" -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.c' -o -name '*.cpp' -o -name '*.cc' -o -name '*.cu' \) | sort)
# A known include that is gone must leave KNOWN too, so that it cannot return.
while IFS= read -r entry; do
    [ -z "$entry" ] && continue
    grep -qxF "$entry" <<<"$found" || bad+=("$entry: listed in KNOWN but no longer included; remove it there")
done <<<"$KNOWN"

if [ ${#bad[@]} -gt 0 ]; then
    echo "edges including headers that are not public (public: ${public[*]}; see docs/Doxyfile):"
    printf '  %s\n' "${bad[@]}"
    exit 1
fi
echo "edges (${edges[*]}) include only public headers: ${public[*]}"
