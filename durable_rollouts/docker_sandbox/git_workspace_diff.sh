#!/usr/bin/env bash
# The agent's patch against the workspace baseline.
# $1 = output directory, $2 = per-file limit, $3 = patch cap, $4 = new-files limit (bytes),
# $5 = how many omissions to list, $6 = baseline file, $7 = harness directory; the rest = exclude pathspecs.
# Writes new objects to a scratch object directory (the repository's objects
# stay readable as an alternate), so running as root never leaves root-owned
# files in the agent's .git. New files over the per-file limit that `git add -A`
# would take are excluded from both the add and the diff, and so are baseline
# files grown past the new-files limit (hashed only when their size equals the
# baseline's, to tell an unchanged one); a smaller baseline file is diffed
# whatever its size (a one-line fix to a big module is a one-line patch). The
# excluded ones that differ from the baseline are listed in $1/omitted (size NUL
# path NUL, at most $5). $1/status: "ok|over <patch bytes> <omitted>" or
# "untaken <new-file bytes> <omitted>"; $1/patch holds the patch only if "ok".
set -e
out=$1 max_file=$2 max_patch=$3 max_new=$4 max_listed=$5 baseline=$6 harness=$7
shift 7
excludes=("$@")
base=$(cat "$baseline" 2>/dev/null || git rev-parse 'HEAD^{tree}')
git_dir=$(git rev-parse --absolute-git-dir)
scratch=$(mktemp -d "$harness/diff.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
rm -rf "$out" && mkdir -p "$out" && : >"$out/omitted"
if [ -f "$git_dir/index" ]; then cp "$git_dir/index" "$scratch/index"; fi
export GIT_INDEX_FILE=$scratch/index GIT_OBJECT_DIRECTORY=$scratch/objects
export GIT_ALTERNATE_OBJECT_DIRECTORIES=$git_dir/objects
mkdir -p "$scratch/objects"
big=() skip=() omitted=0
while IFS= read -r -d '' f; do big+=(":(literal)${f#./}"); done < <(find . -path ./.git -prune -o -type f -size +"$max_file"c -print0)
if [ ${#big[@]} -gt 0 ]; then
  while IFS= read -r -d '' f; do
    size=$(stat -c %s -- "$f")
    if git cat-file -e "$base:./$f" 2>/dev/null; then
      if [ "$size" -le "$max_new" ]; then continue; fi
      skip+=(":(exclude,literal)$f")
      if [ "$(git cat-file -s "$base:./$f")" = "$size" ] \
        && [ "$(git rev-parse -q --verify "$base:./$f")" = "$(git hash-object -- "$f")" ]; then continue; fi
    else
      skip+=(":(exclude,literal)$f")
    fi
    omitted=$((omitted + 1))
    if [ $omitted -le "$max_listed" ]; then printf '%s\0%s\0' "$size" "$f" >>"$out/omitted"; fi
  done < <(git ls-files -z -c -o --exclude-standard -- "${big[@]}" "${excludes[@]}")
fi
new=$(git ls-files -z -o --exclude-standard -- . "${excludes[@]}" "${skip[@]}" | xargs -0 -r stat -c %s -- | awk '{n += $1} END {printf "%.0f", n}')
if [ "${new:-0}" -gt "$max_new" ]; then echo "untaken $new $omitted" >"$out/status"; exit 0; fi
git add -A -- . "${excludes[@]}" "${skip[@]}"
git diff --cached --binary --no-color --no-ext-diff --no-renames "$base" -- . "${excludes[@]}" "${skip[@]}" >"$scratch/patch"
size=$(stat -c %s "$scratch/patch")
if [ "$size" -gt "$max_patch" ]; then echo "over $size $omitted" >"$out/status"; exit 0; fi
mv "$scratch/patch" "$out/patch" && echo "ok $size $omitted" >"$out/status"
